"""jobproc.daemon_context.DaemonOpContext, the context opcodes really get, against a real
wconfd: plain dicts out, wconfd's errors through unchanged, reservations noted."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import pytest

from client import LuxiClient, WConfdClient, errors
from client.api.luxi import Log
from client.capacity import Room
from jobproc.daemon_context import DaemonOpContext
from jobproc.opcodes import OpContext
from jobproc.signals import JobSignals

pytestmark = pytest.mark.timeout(60)

ALL_LOCKS = [
    ["cluster/BGL", "exclusive"],
    ["instance/[lockset]", "exclusive"],
    ["nodegroup/[lockset]", "exclusive"],
    ["node/[lockset]", "exclusive"],
    ["network/[lockset]", "exclusive"],
]


def _context(wc: WConfdClient, reports: list[Any] | None = None) -> DaemonOpContext:
    """A context for opcode 0 of job `wc.job_id`; luxid is never called by these tests
    (its stub connects lazily), nor is the event loop (no interruptible sleep)."""

    def run(awaitable: Any) -> Any:
        raise AssertionError("no event loop in these tests")

    return DaemonOpContext(
        run, wc.job_id or 0, 0, 0, wc, LuxiClient("/nonexistent/luxid.sock"),
        (reports if reports is not None else []).append, JobSignals(), interruptible=False,
    )  # fmt: skip


@pytest.fixture
def ctx(wconfd) -> DaemonOpContext:
    wc = WConfdClient(wconfd.socket, job_id=1)
    assert wc.try_update_locks(ALL_LOCKS) == []
    return _context(wc)


def test_satisfies_the_protocol_and_reads_plain_dicts(ctx):
    assert isinstance(ctx, OpContext)
    cluster = ctx.get_object("cluster", "")
    assert type(cluster) is dict and cluster["name"] == "lockwarden"
    groups = ctx.list_objects("nodegroup")
    assert [type(g) for g in groups] == [dict] and groups[0]["name"] == "default"
    assert ctx.get_object("nodegroup", groups[0]["uuid"]) == groups[0]
    with pytest.raises(errors.NotFound):
        ctx.get_object("node", "ghost")
    assert ctx.node_rooms() == {}


def test_adds_updates_removes(ctx):
    n1 = ctx.add_object("node", {"name": "n1"})
    n2 = ctx.add_object("node", {"name": "n2"})
    assert type(n1) is dict and n1["group"] == ctx.get_object("nodegroup", "default")["uuid"]
    inst = ctx.add_object(
        "instance", {"name": "i1", "primary_node": "n1", "secondary_nodes": ["n2"]}
    )
    assert inst["primary_node"] == n1["uuid"] and inst["secondary_nodes"] == [n2["uuid"]]
    assert ctx.get_object("instance", "i1") == inst
    assert [i["name"] for i in ctx.list_objects("instance")] == ["i1"]

    rooms = ctx.node_rooms(["n1"])
    assert list(rooms) == [n1["uuid"]]
    assert isinstance(rooms[n1["uuid"]], Room) and rooms[n1["uuid"]].name == "n1"

    # update_object answers the new serial_no and mtime; the caller's dict is its own.
    answer = ctx.update_object("instance", {**inst, "memory": 512})
    assert dict(answer) == {"serial_no": 2, "mtime": answer["mtime"]}
    stored = ctx.get_object("instance", "i1")
    assert stored["memory"] == 512 and stored["serial_no"] == 2 and inst["serial_no"] == 1
    with pytest.raises(errors.StaleObjectError):
        ctx.update_object("instance", {**inst, "memory": 64})

    with pytest.raises(errors.ConfigValidationError):
        ctx.remove_object("node", "n1")  # i1 uses it
    ctx.remove_object("instance", "i1")
    ctx.remove_object("node", "n1")
    with pytest.raises(errors.NotFound):
        ctx.get_object("node", n1["uuid"])


def test_errors_pass_through_unchanged(wconfd):
    ctx = _context(WConfdClient(wconfd.socket, name="lockless"))
    with pytest.raises(errors.LockNotHeld):
        ctx.add_object("node", {"name": "n1"})
    with pytest.raises(errors.InvalidParams):
        ctx.get_object("nosuchkind", "x")


def test_reservations_are_this_jobs_and_noted(ctx, wconfd):
    assert ctx.reserved is False
    mac = ctx.generate_mac()
    assert mac.startswith("aa:00:00:") and ctx.reserved is True
    ctx.reserve("ip", "10.0.0.9")
    other = _context(WConfdClient(wconfd.socket, name="other"))
    for namespace, value in [("ip", "10.0.0.9"), ("mac", mac)]:
        with pytest.raises(errors.ReservationError):
            other.reserve(namespace, value)
    me = ctx._wconfd.client_id
    assert sorted(ctx._wconfd.list_reservations()) == [[me, "ip", "10.0.0.9"], [me, "mac", mac]]


def test_log_reports_numbered_entries(wconfd):
    reports: list[Any] = []
    ctx = _context(WConfdClient(wconfd.socket, job_id=7), reports)
    ctx.log("one")
    ctx.log("two", type="debug")
    assert reports == [
        Log(index=0, seq=0, type="message", message="one"),
        Log(index=0, seq=1, type="debug", message="two"),
    ]
    assert ctx.job_id == 7 and ctx.priority == 0


def test_daemon_context_imports_no_daemon_package():
    code = (
        "import sys, jobproc.daemon_context; "
        "bad = sorted(m for m in sys.modules "
        "if m.split('.')[0] in {'wconfd', 'luxid', 'rapi'}); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
