"""The pure parts of the RAPI's trust (docs/operations.md#rapi-users-roles-and-tokens): the
failed-login throttle against a naive model, roles and their rights, the browser write
check, and the loopback rule for plain HTTP."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st

from client.rapi_tokens import Token, token_rights
from client.rapi_users import (
    ROLES,
    User,
    format_roles,
    format_user,
    parse_line,
    parse_roles,
    rights,
)
from rapi.browser import write_refusal
from rapi.main import is_loopback, plain_http_refusal
from rapi.throttle import Throttle

LIMIT, WINDOW = 3, 10.0

# An attempt: seconds since the last one, which user name, which address, right password?
attempts = st.lists(
    st.tuples(
        st.floats(0, 6, allow_nan=False),
        st.sampled_from(["alice", "bob", "eve"]),
        st.sampled_from(["10.0.0.1", "10.0.0.2"]),
        st.booleans(),
    ),
    max_size=60,
)


def model_wait(failures: dict[str, list[float]], keys: list[str], now: float) -> int | None:
    """The spec, literally: every failure kept; a key with `LIMIT` failures within the
    window refuses until the oldest of them is `WINDOW` old."""
    waits = []
    for key in keys:
        recent = [t for t in failures.get(key, []) if now - t < WINDOW]
        if len(recent) >= LIMIT:
            waits.append(max(1, math.ceil(min(recent) + WINDOW - now)))
    return max(waits, default=None)


@settings(max_examples=300, deadline=None)
@given(attempts, st.integers(1, 4))
def test_throttle_matches_the_model(
    steps: list[tuple[float, str, str, bool]], max_keys: int
) -> None:
    throttle = Throttle(limit=LIMIT, window=WINDOW, max_keys=max_keys + 10)
    failures: dict[str, list[float]] = {}
    now = 1000.0
    for gap, name, address, right in steps:
        now += gap
        keys = [f"user:{name}", f"address:{address}"]
        wait = throttle.retry_after(keys, now)
        assert wait == model_wait(failures, keys, now)
        if wait is not None:
            assert wait >= 1
            continue  # a refused attempt is no failure, even with the right password
        if not right:
            throttle.failed(keys, now)
            for key in keys:
                failures.setdefault(key, []).append(now)


def test_the_eleventh_attempt_waits_for_the_oldest_failure() -> None:
    throttle = Throttle()
    for second in range(10):
        assert throttle.retry_after(["a"], 100.0 + second) is None
        throttle.failed(["a"], 100.0 + second)
    assert throttle.retry_after(["a"], 109.5) == 51  # the first failure is 60 s old at 160
    assert throttle.retry_after(["a"], 159.9) == 1
    assert throttle.retry_after(["a"], 160.0) is None
    assert throttle.retry_after(["b"], 110.0) is None


def test_the_throttle_forgets_keys_beyond_its_bound() -> None:
    throttle = Throttle(limit=2, window=60, max_keys=100)
    for n in range(1000):
        throttle.failed([f"k{n}"], float(n))
    assert len(throttle._failures) <= 100


role_sets = st.frozensets(st.sampled_from(ROLES))


@given(role_sets, role_sets)
def test_a_token_never_has_more_than_its_user(
    user_roles: frozenset[str], asked: frozenset[str]
) -> None:
    user = User("u", "{SCRYPT}x", user_roles)
    token = Token("id", "u", "h", tuple(asked), 0.0, None)
    assert token_rights(token, user) <= rights(user_roles)
    assert token_rights(token, user) <= rights(asked)
    assert token_rights(Token("id", "u", "h", None, 0.0, None), user) == rights(user_roles)


@given(role_sets)
def test_roles_round_trip_through_the_file(roles: frozenset[str]) -> None:
    secret = "{SCRYPT}16384$8$1$c2FsdHNhbHRzYWx0$a2V5a2V5a2V5a2V5a2V5a2V5a2V5a2V5"
    assert parse_line(format_user(User("u", secret, roles))) == User("u", secret, roles)
    assert parse_roles(format_roles(roles)) == roles


def test_role_rights() -> None:
    assert rights({"write"}) == {"write", "jobs", "filters", "drains", "instances"}
    assert "audit" not in rights({"write"}) and "admin" not in rights({"write"})
    assert rights({"admin"}) == set(ROLES)
    assert rights(set()) == set()
    try:
        parse_roles("jobs,root")
    except ValueError as exc:
        assert "root" in str(exc)
    else:
        raise AssertionError("an unknown role was accepted")


def test_write_refusals() -> None:
    own = ("http", "127.0.0.1:5080")
    assert write_refusal("application/json", None, *own) is None
    assert write_refusal("Application/JSON; charset=utf-8", "http://127.0.0.1:5080", *own) is None
    for media in (None, "text/plain", "application/x-www-form-urlencoded", "application/jsonx"):
        refusal = write_refusal(media, None, *own)
        assert refusal is not None and refusal[0] == 415
    for origin in ("null", "http://evil.example", "https://127.0.0.1:5080", "http://127.0.0.1"):
        refusal = write_refusal("application/json", origin, *own)
        assert refusal is not None and refusal[0] == 403
    refusal = write_refusal("application/json", "http://x", "http", None)
    assert refusal is not None and refusal[0] == 403


def test_plain_http_only_on_loopback() -> None:
    for address in ("127.0.0.1", "127.8.9.10", "::1", "[::1]", "localhost", "LOCALHOST"):
        assert is_loopback(address), address
    for address in ("0.0.0.0", "::", "10.1.2.3", "example.com", "128.0.0.1", ""):
        assert not is_loopback(address), address
    message = plain_http_refusal("0.0.0.0", tls=False, insecure_http=False)
    assert (
        message is not None and "--ssl-cert/--ssl-key" in message and "--insecure-http" in message
    )
    assert plain_http_refusal("0.0.0.0", tls=True, insecure_http=False) is None
    assert plain_http_refusal("0.0.0.0", tls=False, insecure_http=True) is None
    assert plain_http_refusal("127.0.0.1", tls=False, insecure_http=False) is None
