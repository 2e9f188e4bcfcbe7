"""Who may do what on lw-rapi (docs/operations.md#rapi-users-roles-and-tokens), through the
real daemon: roles and their exact 403s, bearer tokens (made, used, expired, revoked, of a
removed user), failed-login throttling (429 and Retry-After), an unknown user costing what
a known one costs, the browser guards (415, a foreign Origin's 403, the headers, a
cross-site form in headless Chromium), plain HTTP refused off loopback, and the run file
left to the lw-rapi that owns it."""

from __future__ import annotations

import asyncio
import json
import os
import re
import statistics
import sys
import threading
import time
import uuid as uuidlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from browser_testlib import Browser, chromium_path
from test_cli import Lw
from test_rapi import ADMIN, READER, Rapi, assert_error, free_port, write_users
from test_rapi import stack as stack  # the fixture: wconfd + luxid

from client.rapi_users import ROLES
from rapi.routes import ROUTES

pytestmark = pytest.mark.timeout(120)

# One user per role (the password is the name's), besides ADMIN (write) and READER (none).
ROLE_USERS = {role: (f"u-{role}", f"pw-{role}") for role in ROLES}
TOKEN_RE = re.compile(r"^token: (lwt_[A-Za-z0-9_-]{43})\nid: ([0-9a-f]+)\n$")


@pytest.fixture
def rapi(stack: Any, daemon_factory: Any) -> Rapi:
    write_users(
        stack.wconfd.state_dir,
        (*ADMIN, True),
        (*READER, False),
        *((*creds, role) for role, creds in ROLE_USERS.items()),
    )
    return Rapi(daemon_factory)


def lw(stack: Any) -> Lw:
    return Lw(stack.wconfd.run_dir, stack.wconfd.state_dir)


def bearer(token: str) -> dict[str, Any]:
    return {"user": None, "headers": {"Authorization": f"Bearer {token}"}}


def make_token(stack: Any, *args: str) -> tuple[str, str]:
    out = lw(stack).ok("rapi-user", "token", *args)
    match = TOKEN_RE.match(out)
    assert match, out
    return match.group(1), match.group(2)


def concrete(path: str) -> str:
    """A route's path with parameters that name nothing."""
    return (
        path.replace("{name}", "nope")
        .replace("{job_id}", "999999")
        .replace("{uuid}", str(uuidlib.uuid4()))
    )


# -- roles -------------------------------------------------------------------------------------


def test_each_role_grants_exactly_its_writes(rapi: Rapi, stack: Any) -> None:
    writes = [route for route in ROUTES if route.role is not None]  # and GET /2/audit
    assert {route.role for route in writes} == {
        "jobs",
        "filters",
        "drains",
        "instances",
        "audit",
        "admin",
    }
    # A body no handler takes: whoever may write gets 400 or 404, and nothing changes.
    body = {"bogus": 1}
    for route in writes:
        path = concrete(route.path)
        for role, creds in [*ROLE_USERS.items(), ("none", READER), ("write", ADMIN)]:
            answer = rapi.call(route.method, path, body, user=creds)
            granted = (
                role == route.role
                or role == "admin"
                or (role == "write" and route.role not in ("admin", "audit"))
            )
            if granted:
                assert answer.status != 403, (route.method, route.path, role, answer)
            else:
                assert answer.status == 403, (route.method, route.path, role, answer)
                assert answer.body["explain"] == f"needs role {route.role}"
    for creds in (READER, *ROLE_USERS.values()):  # every valid user reads
        assert rapi.call("GET", "/2/filters", user=creds).status == 200
    assert rapi.get("/2/filters") == []
    assert rapi.get("/2/info", user=READER)["insecure_http"] is False
    log = rapi.daemon.log()
    assert "user 'u-jobs' lacks role filters; 403" in log
    assert "pw-" not in log


def test_lw_rapi_user_roles(stack: Any) -> None:
    cli = lw(stack)
    cli.ok("rapi-user", "add", "ops", "--roles", "jobs,filters", "--password-stdin", input="p\n")
    cli.ok("rapi-user", "add", "old", "--write", "--password-stdin", input="p\n")
    listed = {u["name"]: u["roles"] for u in cli.json("rapi-user", "list")}
    assert listed["ops"] == ["jobs", "filters"] and listed["old"] == ["write"]
    assert "ops" in cli.ok("rapi-user", "list") and "jobs,filters" in cli.ok("rapi-user", "list")
    assert "root" in cli.fails(2, "rapi-user", "add", "x", "--roles", "root", input="p\n")
    line = next(
        x
        for x in (stack.wconfd.state_dir / "rapi_users").read_text().splitlines()
        if x.startswith("old ")
    )
    assert line.endswith(" write")  # the old format, kept


def test_lw_rapi_user_finds_and_keeps_rapis_own_directory(stack: Any, tmp_path: Path) -> None:
    import subprocess

    from test_cli import LW

    own = tmp_path / "lockwarden-rapi"
    own.mkdir(mode=0o700)
    if os.geteuid() == 0:  # root's edits keep the directory's owner (lw-rapi's user)
        os.chown(own, 65534, 65534)
    env = {**os.environ, "LW_RAPI_STATE_DIR": str(own)}
    for argv in (["add", "ops", "--roles", "jobs", "--password-stdin"], ["token", "ops"]):
        done = subprocess.run(
            [LW, "rapi-user", *argv], input="p\n", env=env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
    for name in ("rapi_users", "rapi_tokens", "rapi_tokens.lock"):
        st = (own / name).stat()
        assert st.st_mode & 0o077 == 0, name
        if os.geteuid() == 0:
            assert (st.st_uid, st.st_gid) == (65534, 65534), name
    assert not (stack.wconfd.state_dir / "rapi_tokens").exists()


# -- tokens ------------------------------------------------------------------------------------


def test_tokens_made_used_listed_and_revoked(rapi: Rapi, stack: Any) -> None:
    cli = lw(stack)
    user, _ = ROLE_USERS["filters"]
    token, token_id = make_token(stack, user)
    assert token not in (stack.wconfd.state_dir / "rapi_tokens").read_text()
    assert rapi.call("GET", "/2/jobs", **bearer(token)).status == 200
    assert rapi.call("POST", "/2/filters", {"bogus": 1}, **bearer(token)).status == 400
    denied = rapi.call("DELETE", "/2/jobs/1", **bearer(token))
    assert denied.status == 403 and denied.body["explain"] == "needs role jobs"

    # A token never has more than its user: refused at making, and cut to the user's roles.
    assert "jobs" in cli.fails(1, "rapi-user", "token", user, "--roles", "jobs")
    admin_token, _ = make_token(stack, ADMIN[0], "--roles", "jobs")
    assert rapi.call("DELETE", "/2/jobs/999999", **bearer(admin_token)).status == 404
    denied = rapi.call("POST", "/2/filters", {"bogus": 1}, **bearer(admin_token))
    assert denied.body["explain"] == "needs role filters"

    listed = cli.json("rapi-user", "tokens")
    assert [set(t) for t in listed] == [{"id", "user", "roles", "created", "expires"}] * 2
    assert {t["id"]: t["roles"] for t in listed}[token_id] is None
    assert [t["user"] for t in cli.json("rapi-user", "tokens", user)] == [user]
    assert token_id in cli.ok("rapi-user", "tokens")

    cli.ok("rapi-user", "revoke", token_id)
    assert_error(rapi.call("GET", "/2/jobs", **bearer(token)), 401)
    cli.fails(1, "rapi-user", "revoke", token_id)

    # Removing the user ends its tokens.
    assert rapi.call("GET", "/2/jobs", **bearer(admin_token)).status == 200
    cli.ok("rapi-user", "remove", ADMIN[0])
    assert_error(rapi.call("GET", "/2/jobs", **bearer(admin_token)), 401)
    assert "unknown, expired or revoked token; 401" in rapi.daemon.log()
    assert token not in rapi.daemon.log()


def test_tokens_over_the_rapi_and_their_expiry(rapi: Rapi, stack: Any) -> None:
    admin = ROLE_USERS["admin"]
    answer = rapi.call(
        "POST", "/2/tokens", {"user": READER[0], "roles": None, "expires": "1s"}, user=admin
    )
    assert answer.status == 200, answer
    made = answer.body
    assert set(made) == {"id", "token", "user", "roles", "expires"} and made["user"] == READER[0]
    assert made["token"].startswith("lwt_") and made["roles"] is None
    assert rapi.call("GET", "/2/jobs", **bearer(made["token"])).status == 200
    time.sleep(max(0.0, made["expires"] - time.time()) + 0.05)  # the token's own expiry
    assert_error(rapi.call("GET", "/2/jobs", **bearer(made["token"])), 401)

    jobs = rapi.call(
        "POST", "/2/tokens", {"user": ROLE_USERS["jobs"][0], "roles": ["jobs"]}, user=admin
    )
    assert jobs.status == 200 and jobs.body["roles"] == ["jobs"] and jobs.body["expires"] is None
    for body, words in [
        ({"user": READER[0], "roles": ["jobs"]}, "lacks role(s) jobs"),
        ({"user": "nobody"}, "no RAPI user 'nobody'"),
        ({"user": READER[0], "expires": "soon"}, "not a duration"),
        ({"user": READER[0], "roles": ["root"]}, "root"),
    ]:
        assert_error(rapi.call("POST", "/2/tokens", body, user=admin), 400, words)
    denied = rapi.call("POST", "/2/tokens", {"user": READER[0]})  # write is not admin
    assert denied.status == 403 and denied.body["explain"] == "needs role admin"
    token_ids = [
        t["id"]
        for t in lw(stack).json(
            "rapi-user", "tokens", "--rapi-state-dir", str(stack.wconfd.state_dir)
        )
    ]
    assert made["id"] in token_ids and jobs.body["id"] in token_ids


# -- failed logins -----------------------------------------------------------------------------


def test_ten_failures_then_429_even_with_the_right_password(rapi: Rapi) -> None:
    for _ in range(10):
        assert_error(rapi.call("GET", "/2/jobs", user=(ADMIN[0], "wrong")), 401)
    throttled = rapi.call("GET", "/2/jobs", user=ADMIN)
    assert throttled.status == 429, throttled
    assert 1 <= int(throttled.headers["Retry-After"]) <= 60
    # The address is throttled too: another user from it waits as well.
    assert rapi.call("GET", "/2/jobs", user=READER).status == 429
    assert rapi.call("GET", "/2/jobs", **bearer("lwt_x")).status == 429
    assert rapi.call("GET", "/version").status == 200  # public
    log = rapi.daemon.log()
    assert log.count("from 127.0.0.1: wrong user name or password for 'admin'; 401") == 10
    assert "too many failed logins; 429" in log


def test_an_unknown_user_costs_what_a_known_one_costs_and_tokens_count(rapi: Rapi) -> None:
    def median(user: tuple[str, str]) -> float:
        times = []
        for _ in range(4):  # 8 failures in all: below the throttle's 10
            started = time.perf_counter()
            assert rapi.call("GET", "/2/jobs", user=user).status == 401
            times.append(time.perf_counter() - started)
        return statistics.median(times)

    known, unknown = median((ADMIN[0], "wrong")), median(("nobody", "wrong"))
    assert unknown > known / 3 and known > unknown / 3, (known, unknown)
    # Two failed bearer tokens make the address's tenth failure.
    assert rapi.call("GET", "/2/jobs", user=ADMIN).status == 200
    for n in range(2):
        assert_error(rapi.call("GET", "/2/jobs", **bearer(f"lwt_guess{n}")), 401)
    assert rapi.call("GET", "/2/jobs", user=ADMIN).status == 429


# -- browsers ----------------------------------------------------------------------------------


def test_writes_need_json_and_their_own_origin_and_answers_carry_headers(rapi: Rapi) -> None:
    own = f"http://127.0.0.1:{rapi.port}"
    for media in ("text/plain", "application/x-www-form-urlencoded", "multipart/form-data"):
        for user in (ADMIN, None):  # before authentication
            answer = rapi.call("POST", "/2/filters", {}, user=user, headers={"Content-Type": media})
            assert_error(answer, 415, "application/json")
    answer = rapi.call("DELETE", "/2/jobs/1", headers={"Content-Type": "text/plain"})
    assert_error(answer, 415)
    for origin in ("http://evil.example", "null", f"https://127.0.0.1:{rapi.port}"):
        for user in (ADMIN, None):
            assert_error(
                rapi.call("POST", "/2/filters", {}, user=user, headers={"Origin": origin}),
                403,
                "origin",
            )
    assert rapi.get("/2/filters") == []
    json_utf8 = {"Content-Type": "application/json; charset=utf-8", "Origin": own}
    assert rapi.call("POST", "/2/filters", {}, headers=json_utf8).status == 200
    assert rapi.call("GET", "/2/jobs", headers={"Origin": "null"}).status == 200  # reads pass
    # Every answer says nosniff; the dashboard's also forbid inline code and framing.
    for path, user in [
        ("/2/info", ADMIN),
        ("/2/info", None),
        ("/2/nope", ADMIN),
        ("/ui/", READER),
        ("/ui/app.js", READER),
        ("/openapi.json", None),
    ]:
        answer = rapi.call("GET", path, user=user)
        assert answer.headers["X-Content-Type-Options"] == "nosniff", (path, answer)
        ui = path.startswith("/ui/")
        assert answer.headers.get("Content-Security-Policy") == (
            "default-src 'self'" if ui else None
        )
        assert answer.headers.get("X-Frame-Options") == ("DENY" if ui else None)


class _AttackerPage(BaseHTTPRequestHandler):
    """A page on another origin that posts a JSON filter as a text/plain form (the classic
    cross-site request), and by fetch() without a preflight."""

    target = ""

    def do_GET(self) -> None:
        name = '{"action":"REJECT","predicates":[],"reason":[["csrf","x'
        value = '",1]]}'
        page = f"""<!doctype html><html><body>
<form method="POST" action="{self.target}" enctype="text/plain">
<input type="hidden" name='{name}' value='{value}'></form>
<script>
fetch("{self.target}", {{method: "POST", mode: "no-cors", credentials: "include",
  headers: {{"Content-Type": "text/plain"}}, body: '{{"action":"REJECT","predicates":[]}}'}})
  .finally(() => document.forms[0].submit());
</script></body></html>"""
        body = page.encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def attacker(rapi: Rapi) -> Iterator[str]:
    _AttackerPage.target = f"{rapi.base}/2/filters"
    server = ThreadingHTTPServer(("127.0.0.1", 0), _AttackerPage)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://localhost:{server.server_address[1]}/"  # another origin than 127.0.0.1
    server.shutdown()
    server.server_close()


@pytest.mark.skipif(
    chromium_path() is None, reason="no Chromium (Debian: apt-get install chromium)"
)
def test_a_cross_site_form_adds_no_filter(rapi: Rapi, attacker: str, tmp_path: Path) -> None:
    import base64

    # The payload is a valid filter: sent as JSON by a client of the RAPI it is accepted.
    body = {"action": "REJECT", "predicates": [], "reason": [["csrf", "x=", 1]]}
    accepted = rapi.call("POST", "/2/filters", body)
    assert accepted.status == 200
    assert rapi.call("DELETE", f"/2/filters/{accepted.body}").status == 200

    def from_chromium() -> list[str]:
        return [
            line
            for line in rapi.daemon.log().splitlines()
            if '"POST /2/filters HTTP/1.1"' in line and "Chrome" in line
        ]

    async def drive() -> None:
        async with Browser(tmp_path / "chromium") as browser:
            token = base64.b64encode(f"{ADMIN[0]}:{ADMIN[1]}".encode()).decode()
            # The browser holds the credentials: every request it sends carries them.
            await browser.open(attacker, {"Authorization": f"Basic {token}"})
            loop = asyncio.get_running_loop()
            deadline = loop.time() + 20
            while len(from_chromium()) < 2:  # the fetch and the form reached lw-rapi
                assert loop.time() < deadline, rapi.daemon.log()[-3000:]
                await asyncio.sleep(0.05)

    asyncio.run(drive())
    assert rapi.get("/2/filters") == []
    assert all('HTTP/1.1" 415' in line for line in from_chromium()), from_chromium()


# -- plain HTTP off loopback, the run file --------------------------------------------------


def test_plain_http_off_loopback_needs_insecure_http(stack: Any, daemon_factory: Any) -> None:
    refused = daemon_factory("rapi", "--bind", "0.0.0.0", "--port", str(free_port()))
    refused.start(wait=False)
    assert refused.proc.wait(30) == 1
    assert "--ssl-cert/--ssl-key" in refused.log() and "--insecure-http" in refused.log()
    insecure = Rapi(daemon_factory, "--bind", "0.0.0.0", "--insecure-http")
    assert insecure.get("/2/info")["insecure_http"] is True
    assert "--insecure-http: serving plain HTTP" in insecure.daemon.log()


def test_a_second_rapi_leaves_the_first_ones_run_file(stack: Any, daemon_factory: Any) -> None:
    run_file = stack.wconfd.run_dir / "rapi.json"
    # A record whose pid lives but is no lw-rapi (a pid used again) is taken over.
    run_file.write_text(json.dumps({"url": "http://gone/", "pid": os.getpid()}))
    first = Rapi(daemon_factory)
    assert json.loads(run_file.read_text()) == {
        "url": f"http://127.0.0.1:{first.port}/",
        "pid": first.daemon.pid,
    }
    second = Rapi(daemon_factory)
    assert json.loads(run_file.read_text())["pid"] == first.daemon.pid
    assert "still runs: left as it is" in second.daemon.log()
    assert second.daemon.stop() == 0
    assert json.loads(run_file.read_text())["pid"] == first.daemon.pid
    assert first.daemon.stop() == 0
    assert not run_file.exists()
