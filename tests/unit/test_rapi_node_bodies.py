"""The checks lw-rapi makes at the edge of its drain and evacuate resources (docs/rapi-drains.md),
as properties: whatever JSON a client sends is either turned into arguments that luxid
accepts or refused with a 400 that names the parameter — never another error.
"""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rapi.drains import DRAIN_BODY_PARAMS, PRIORITIES, drain_params
from rapi.nodeops import EVAC_BODY_PARAMS, check_evacuation
from rapi.routing import HttpError, Request

HUGE = st.integers(2**63 - 2, 2**64) | st.integers(max_value=-(2**63) + 1) | st.just(10**400)
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | HUGE | st.floats() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner),
    max_leaves=6,
)


def request(body: Any, **query: str) -> Request:
    """A request as a handler sees it; these checks never reach a daemon."""
    return Request(match={"name": "n1"}, query=query, body=body, backend=None)  # type: ignore[arg-type]


def bodies(keys: tuple[str, ...]) -> st.SearchStrategy[Any]:
    """JSON bodies, mostly objects with the resource's own keys and arbitrary values."""
    known = st.dictionaries(st.sampled_from(keys), JSON | st.integers(-30, 30), max_size=len(keys))
    return known | st.dictionaries(st.text(max_size=12), JSON, max_size=2) | JSON


@given(bodies(DRAIN_BODY_PARAMS))
def test_a_drain_body_gives_valid_arguments_or_a_400(body: Any) -> None:
    try:
        params = drain_params(request(body))
    except HttpError as exc:
        assert exc.status == 400 and exc.explain
        assert not isinstance(body, dict) or any(name in exc.explain for name in body)
        return
    assert isinstance(body, dict | None)
    assert set(params) == set(body or {})
    deadline = params.get("deadline")
    assert deadline is None or (
        isinstance(deadline, float) and math.isfinite(deadline) and deadline >= 0
    )
    assert 1 <= params.get("max_parallel", 1) < 2**63
    assert params.get("priority", 0) in PRIORITIES
    assert isinstance(params.get("message", ""), str)
    for name in ("max_parallel", "priority", "message"):
        if name in params:
            assert params[name] == body[name] and type(params[name]) is type(body[name])


@pytest.mark.parametrize(
    ("deadline", "seconds"),
    [(0, 0.0), (90, 90.0), (2.5, 2.5), ("15m", 900.0), ("1h30m", 5400.0), (None, None)],
)
def test_drain_deadlines(deadline: Any, seconds: float | None) -> None:
    assert drain_params(request({"deadline": deadline})) == {"deadline": seconds}


@pytest.mark.parametrize(
    "deadline", [-1, 10**400, 2**63, float("inf"), float("nan"), "9" * 400 + "d", True, [1]]
)
def test_drain_deadlines_refused(deadline: Any) -> None:
    with pytest.raises(HttpError, match="deadline") as caught:
        drain_params(request({"deadline": deadline}))
    assert caught.value.status == 400


@given(bodies(EVAC_BODY_PARAMS), st.sampled_from(["", "0", "1", "x"]))
def test_an_evacuation_body_is_accepted_or_a_400(body: Any, dry_run: str) -> None:
    try:
        check_evacuation(request(body, **{"dry-run": dry_run}))
    except HttpError as exc:
        assert exc.status == 400 and exc.explain
        return
    assert dry_run in ("", "0")
    assert body is None or (isinstance(body, dict) and set(body) <= set(EVAC_BODY_PARAMS))
    assert (body or {}).get("mode") in (None, "primary-only", "all")
    assert (body or {}).get("remote_node") is None
