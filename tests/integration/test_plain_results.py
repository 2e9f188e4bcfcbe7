"""Stub results are plain JSON (docs/contracts.md#python-client-stubs): every declared method of
both daemons, called through the sync and the asyncio stubs against real daemons, returns values in
which every JSON array is a `list` at every depth, and `msgspec.to_builtins` of the result is
exactly the JSON the daemon sent.

The scenario makes each result non-trivial (locks held and waited for, reservations, a
job with log entries, a filter) so nested arrays are really there to be checked.  The one
method it cannot call is `job_report` (only a job's own process may); its result type is
checked by `test_no_declared_result_type_holds_a_tuple`, and jobproc decodes it in every job.
"""

from __future__ import annotations

import asyncio
import inspect
import sys
import typing
from collections import defaultdict
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import msgspec
import pytest

from client import AsyncLuxiClient, AsyncWConfdClient, LuxiClient, WConfdClient
from client.api.luxi import LuxiApi
from client.api.wconfd import WConfdApi
from client.follow import AsyncFollowing

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import ADMIN_LOCKS, FINAL, delay

pytestmark = pytest.mark.timeout(120)

# step_down answers only on etcd (test_ha_wconfd.py calls it through `lw cluster failover`).
NOT_CALLABLE_HERE = {"job_report", "step_down"}
Seen = dict[str, list[tuple[bytes, Any]]]


def _recording(base: type, seen: Seen) -> type:
    """A subclass of stub `base` that keeps (raw JSON, decoded value) of every result."""

    class Recording(base):  # type: ignore[misc, valid-type]
        def _result(self, spec: Any, response: Any) -> Any:
            value = super()._result(spec, response)
            seen[spec.name].append((bytes(response.result), value))
            return value

    return Recording


def _tuples_in(value: Any, path: str = "$") -> list[str]:
    """Paths of every tuple inside a decoded result (Structs, lists and dicts walked)."""
    if isinstance(value, tuple):
        return [path]
    if isinstance(value, msgspec.Struct):
        return [
            p
            for name in value.__struct_fields__
            for p in _tuples_in(getattr(value, name), f"{path}.{name}")
        ]
    if isinstance(value, list):
        return [p for i, item in enumerate(value) for p in _tuples_in(item, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for key, item in value.items() for p in _tuples_in(item, f"{path}.{key}")]
    return []


Call = Callable[..., Awaitable[Any]]


async def _first(follow: Any) -> Any:
    """The answer of a follow (sync or asyncio), which is then closed."""
    if isinstance(follow, AsyncFollowing):
        try:
            return await anext(follow)
        finally:
            await follow.aclose()
    try:
        return await asyncio.to_thread(next, follow)
    finally:
        follow.close()


async def _scenario(wc: Any, other: Any, waiter: Any, lc: Any, call: Call) -> None:
    """Call every declared method except job_report, with results worth checking."""
    await call(wc, "ping")
    await call(wc, "version")
    await call(lc, "ping")
    await call(lc, "version")
    await call(wc, "get_metrics")
    await call(lc, "get_metrics")
    await call(wc, "get_role")
    await call(lc, "get_role")
    assert len(await call(wc, "list_roles")) == 1
    # -- configuration, under every lock a write may need
    await call(wc, "update_locks_waiting", request=ADMIN_LOCKS, timeout=10)
    serial = (await call(wc, "get_config"))["cluster"]["serial_no"]
    await call(wc, "add_object", kind="node", object={"name": "n1"})
    await call(wc, "add_object", kind="node", object={"name": "n2"})
    node = await call(wc, "get_object", kind="node", key="n2")
    await call(wc, "update_object", kind="node", object=node)
    assert len(await call(wc, "list_objects", kind="node")) == 2
    (room,) = await call(wc, "get_node_rooms", nodes=["n2"])
    assert (room.name, room.mused, room.cused, room.eligible) == ("n2", 0, 0, True)
    await call(wc, "remove_object", kind="node", key="n2")
    await call(wc, "wait_config_change", since_serial=serial, timeout=1)
    await call(wc, "free_locks")
    # -- reservations
    await call(wc, "reserve", namespace="ip", value="10.0.0.1")
    await call(wc, "generate_mac")
    assert len(await call(wc, "list_reservations")) == 2
    # -- locks: held by two clients, one request waiting
    assert (
        await call(wc, "try_update_locks", request=[["node/a", "exclusive"], ["node/b", "shared"]])
        == []
    )
    assert await call(other, "try_update_locks", request=[["node/b", "shared"]]) == []
    assert await call(wc, "opportunistic_lock_union", request=[["node/c", "exclusive"]]) == [
        "node/c"
    ]
    assert await call(wc, "list_locks") == [
        ["node/a", "exclusive"], ["node/b", "shared"], ["node/c", "exclusive"]
    ]  # fmt: skip
    waiting = asyncio.ensure_future(
        call(waiter, "update_locks_waiting", request=[["node/a", "shared"]], timeout=30)
    )
    for _ in range(500):
        pending = (await call(wc, "list_all_locks")).pending
        if pending:
            break
        await asyncio.sleep(0.01)
    assert pending[0].request == [["node/a", "shared"]]
    (wait,) = await call(wc, "lock_waits")
    assert wait.lock == "node/a" and wait.held_by
    locks_serial = await call(wc, "wait_locks_change", since_serial=-1, timeout=0)
    clients = await call(wc, "list_clients")
    mine = next(c for c in clients if c.client_id == wc.client_id)
    assert mine.locks and mine.reservations
    assert any(c.pending is not None for c in clients)
    await call(wc, "intersect_locks", locks=["node/a", "node/b"])
    await call(wc, "downgrade_locks_level", level="node")  # node/a shared: the waiter's turn
    assert (await waiting).granted
    assert await call(wc, "wait_locks_change", since_serial=locks_serial, timeout=5) != locks_serial
    await call(wc, "free_locks_level", level="node")
    await call(wc, "release_reservation", namespace="ip", value="10.0.0.1")
    await call(wc, "release_reservations")
    await call(wc, "cleanup_dead_clients")
    # -- jobs and filters
    job = await call(lc, "submit_job", ops=[delay(0, log_messages=["a", "b"])])
    outcomes = await call(lc, "submit_many_jobs", jobs=[[delay(0)], [{"OP_ID": "OP_NOPE"}]])
    assert outcomes[0][0] is True and outcomes[1][0] is False
    serial_seen, logged = None, []
    while True:
        change = await call(
            lc, "wait_for_job_change", job_id=job, fields=["status"], prev_values=None,
            prev_log_serial=serial_seen, timeout=5,
        )  # fmt: skip
        logged += change.log
        serial_seen = max([serial_seen or 0, *(entry[0] for entry in change.log)])
        if change.values[0] in FINAL:
            break
    assert [entry[3] for entry in logged] == ["a", "b"]
    assert (await call(lc, "why_job", job_id=job)).chain == []
    for daemon in (wc, lc):
        everything = ["job", "drain", "filter", "queue", "lock", "config", "role"]
        batch = await call(daemon, "watch_events", after=0, topics=everything, timeout=0)
        assert batch.events and batch.last == batch.events[-1].index
        first = await _first(await call(daemon, "follow_events", after=0, topics=everything))
        assert first.events[0] == batch.events[0]
    rows = await call(lc, "query_jobs", ids=[job, 10**6], fields=["id", "oplog", "opresult"])
    assert rows[1] is None
    await call(lc, "set_drain_flag", flag=False)
    await call(lc, "query_queue_info")
    queue_serial = await call(lc, "wait_queue_change", since_serial=-1, timeout=0)
    overview = await call(lc, "query_queue_overview", queued=10, recent=10)
    assert job in overview.recent and overview.pending_reasons == []
    rule = await call(
        lc, "replace_filter", uuid=None, priority=0, predicates=[], action="PAUSE",
        reason=[["test", "plain results", 1]],
    )  # fmt: skip
    assert (await call(lc, "query_filters"))[0][0] == rule
    paused = await call(lc, "submit_job", ops=[delay(0)])
    assert (await call(lc, "change_job_priority", job_id=paused, priority=5))[0] is True
    assert (await call(lc, "cancel_job", job_id=paused))[0] is True
    await call(lc, "delete_filter", uuid=rule)
    assert await call(lc, "archive_job", job_id=job) is True
    assert await call(lc, "wait_queue_change", since_serial=queue_serial, timeout=5) != queue_serial
    await call(lc, "auto_archive_jobs", age=0)
    # -- drains: a node drain (events, jobs, a shut-down list) and a queue drain
    added = await call(lc, "submit_job", ops=[{"OP_ID": "OP_NODE_ADD", "node_name": "d1"}])
    while (await call(lc, "query_jobs", ids=[added], fields=["status"]))[0][0] not in FINAL:
        await asyncio.sleep(0.02)
    plan = await call(lc, "plan_node_drain", node="d1", max_parallel=2)
    assert plan.node == "d1" and plan.moves == []
    budget = await call(lc, "set_budget", name="b1", tags=["t1"], max_disrupted=1)
    assert budget.members == [] and (await call(lc, "query_budgets"))[0].name == "b1"
    assert await call(lc, "delete_budget", name="b1") is None
    started = await call(lc, "drain_node", node="d1", deadline=None, max_parallel=2)
    assert started.target == "node/d1"
    change = await call(lc, "wait_for_drain_change", target="node/d1", since_event=0, timeout=5)
    assert change.events and change.status.jobs
    assert (await call(lc, "cancel_node_drain", node="d1", keep_drained=True)).target == "node/d1"
    assert (await call(lc, "drain_queue", mode="soft", deadline=60)).mode == "soft"
    assert [d.target for d in await call(lc, "query_drains")] == ["node/d1", "queue"]
    assert await call(lc, "undrain_queue") is None
    for stub in (wc, lc):  # each daemon's part of a backup, under its own state dir
        part = await call(stub, "backup", dir="plain")
        assert part.path.endswith("/backups/plain") and part.files
        assert await call(stub, "query_audit", limit=5)  # the audited calls above


def _check(seen: Seen) -> None:
    declared = set(WConfdApi.methods()) | set(LuxiApi.methods())
    assert set(seen) == declared - NOT_CALLABLE_HERE, "declared methods the scenario missed"
    for name, results in seen.items():
        for raw, value in results:
            assert not _tuples_in(value), f"{name}: tuples at {_tuples_in(value)}"
            assert msgspec.to_builtins(value) == msgspec.json.decode(raw), name


@pytest.fixture
def daemons(daemon_factory):
    wconfd = daemon_factory("wconfd").start()
    luxid = daemon_factory("luxid").start()
    return wconfd.socket, luxid.socket


def test_sync_stub_results_are_plain_json(daemons):
    seen: Seen = defaultdict(list)
    wsock, lsock = daemons
    wc_cls, lc_cls = _recording(WConfdClient, seen), _recording(LuxiClient, seen)
    stubs = [wc_cls(wsock, name=n) for n in ("a", "b", "c")]

    async def call(stub: Any, method: str, /, **kwargs: Any) -> Any:
        return await asyncio.to_thread(getattr(stub, method), **kwargs)

    asyncio.run(_scenario(*stubs, lc_cls(lsock), call))
    _check(seen)


def test_async_stub_results_are_plain_json(daemons):
    seen: Seen = defaultdict(list)
    wsock, lsock = daemons
    wc_cls, lc_cls = _recording(AsyncWConfdClient, seen), _recording(AsyncLuxiClient, seen)

    async def call(stub: Any, method: str, /, **kwargs: Any) -> Any:
        result = getattr(stub, method)(**kwargs)
        return await result if inspect.isawaitable(result) else result  # a follow is not

    async def main() -> None:
        stubs = [wc_cls(wsock, name=n) for n in ("a", "b", "c")]
        lc = lc_cls(lsock)
        try:
            await _scenario(*stubs, lc, call)
        finally:
            for stub in [*stubs, lc]:
                await stub.close()

    asyncio.run(main())
    _check(seen)


def _tuple_types_in(tp: Any, seen: set[int] | None = None) -> list[str]:
    """Every tuple type inside a declared result type (Structs' fields walked)."""
    seen = set() if seen is None else seen
    if id(tp) in seen:
        return []
    seen.add(id(tp))
    origin = typing.get_origin(tp)
    if tp is tuple or origin is tuple:
        return [repr(tp)]
    if isinstance(tp, type) and issubclass(tp, msgspec.Struct):
        hints = typing.get_type_hints(tp, include_extras=True)
        return [t for h in hints.values() for t in _tuple_types_in(h, seen)]
    return [t for arg in typing.get_args(tp) for t in _tuple_types_in(arg, seen)]


def test_no_declared_result_type_holds_a_tuple():
    for api in (WConfdApi, LuxiApi):
        for name, spec in api.methods().items():
            assert not _tuple_types_in(spec.result_type), name
