"""The RAPI's side of the audit log, without daemons: `GET /2/audit`'s arguments, each
request's actor on the audited calls it makes, and `lw audit`'s times."""

from __future__ import annotations

import argparse
import asyncio
import math
import time
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.audit import DEFAULT_LIMIT, MAX_LIMIT, Query
from client.cli.argtypes import past_time
from rapi.audit import parse_query
from rapi.routing import Backend


@given(
    since=st.floats(allow_nan=False, allow_infinity=False),
    until=st.floats(allow_nan=False, allow_infinity=False),
    limit=st.integers(0, MAX_LIMIT),
    actor=st.text(min_size=1),
)
def test_good_arguments_are_the_query(since: float, until: float, limit: int, actor: str) -> None:
    args = {"since": repr(since), "until": repr(until), "limit": str(limit), "actor": actor}
    assert parse_query(args) == Query(since, until, actor, None, limit)


def test_absent_or_empty_arguments_ask_for_everything() -> None:
    assert parse_query({}) == Query(limit=DEFAULT_LIMIT)
    empty = {"since": "", "until": "", "actor": "", "target": "", "limit": ""}
    assert parse_query(empty) == Query()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        ({"since": "yesterday"}, "'since'"),
        ({"until": "nan"}, "'until'"),
        ({"since": "inf"}, "'since'"),
        ({"limit": "-1"}, "'limit'"),
        ({"limit": str(MAX_LIMIT + 1)}, "'limit'"),
        ({"limit": "ten"}, "'limit'"),
    ],
)
def test_bad_arguments_are_refused_naming_them(args: dict[str, str], named: str) -> None:
    with pytest.raises(ValueError, match=named):
        parse_query(args)


class _Stub:
    """Records the calls made to it (a stand-in for an async stub)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.socket_path = "/nowhere"

    def __getattr__(self, name: str) -> Any:
        async def call(**kwargs: Any) -> None:
            self.calls.append((name, kwargs))

        return call


def test_a_request_backend_names_the_actor_on_audited_calls_only() -> None:
    luxi, wconfd = _Stub(), _Stub()
    shared = Backend(luxi, wconfd)  # type: ignore[arg-type]
    assert shared.acting_for(None) is shared
    backend = shared.acting_for("rapi:alice/token:t1")

    async def calls() -> None:
        await backend.luxi.submit_job(ops=[])
        await backend.luxi.cancel_job(job_id=1, actor="rapi:bob")  # its own actor stays
        await backend.luxi.query_jobs(ids=None, fields=["id"])
        await backend.wconfd.update_object(kind="node", obj={})

    asyncio.run(calls())
    assert luxi.calls == [
        ("submit_job", {"ops": [], "actor": "rapi:alice/token:t1"}),
        ("cancel_job", {"job_id": 1, "actor": "rapi:bob"}),
        ("query_jobs", {"ids": None, "fields": ["id"]}),
    ]
    assert wconfd.calls == [
        ("update_object", {"kind": "node", "obj": {}, "actor": "rapi:alice/token:t1"})
    ]
    assert backend.luxi.socket_path == "/nowhere"  # everything else is the stub's own


def test_past_times_are_durations_ago_or_iso_times() -> None:
    assert math.isclose(past_time("1h"), time.time() - 3600, abs_tol=5)
    assert past_time("2026-12-24T01:00Z") == 1798074000.0
    with pytest.raises(argparse.ArgumentTypeError, match="not a duration or a time"):
        past_time("last tuesday")
