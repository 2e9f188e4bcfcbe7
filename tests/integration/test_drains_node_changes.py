"""A node drain changed while it runs (docs/contracts.md#node-drain), through the real daemons:
updated (`drain_node` again), canceled while moves are queued and running, an instance placed on the
node while the drain's first job waited, and a blocked drain resumed by a node being undrained.

Moves are kept queued with `cluster.max_running_jobs` 1, and waiting by a lock a test
client holds.  A drain's moves carry no `duration` (luxid submits them), so the cancel test
lengthens the simulated data plane of its job processes alone: a `sitecustomize` on their
PYTHONPATH gives OP_INSTANCE_MIGRATE/FAILOVER a `duration` of MOVE_SECONDS (interruptible,
spent with the locks held, as a real migration's copy), so one move is running for that
long.  Nothing else of the daemons changes.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_drains_node import add_node, create, drain_jobs, follow, messages, placed
from test_drains_node import stack as stack  # the fixture: wconfd + luxid
from test_jobproc_opcodes import run as ok

from client import WConfdClient

pytestmark = pytest.mark.timeout(180)

MOVE_SECONDS = 4.0
SLOW_MOVES = """\
import os, sys

if sys.orig_argv[1:3] == ["-m", "jobproc"]:  # job processes (and their zygote) only
    import msgspec
    from jobproc.opcodes.builtin import instance_move

    _seconds = float(os.environ["LW_TEST_MOVE_SECONDS"])
    _execute = instance_move._InstanceMove.execute

    def _slow(self, ctx):
        self.params = msgspec.structs.replace(
            self.params, duration=max(self.params.duration, _seconds)
        )
        return _execute(self, ctx)

    instance_move._InstanceMove.execute = _slow
"""


@pytest.fixture
def slow_moves(
    daemon_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Stack]:
    """wconfd + luxid whose job processes take MOVE_SECONDS for each migration."""
    site = tmp_path / "slow-moves"
    site.mkdir()
    (site / "sitecustomize.py").write_text(SLOW_MOVES)
    path = os.environ.get("PYTHONPATH")
    monkeypatch.setenv("PYTHONPATH", str(site) if not path else f"{site}{os.pathsep}{path}")
    monkeypatch.setenv("LW_TEST_MOVE_SECONDS", str(MOVE_SECONDS))
    s = Stack(daemon_factory)
    yield s
    s.close()


def three_on_n1(stack: Stack) -> None:
    """n1 with vm0..vm2, n2 with room for all; one job runs at a time."""
    ok(stack, add_node("n1"), add_node("n2"))
    ok(stack, *(create(f"vm{i}", 256, "n1") for i in range(3)))
    stack.set_cluster(max_running_jobs=1)


def moves_of(stack: Stack, target: str = "node/n1") -> list[dict[str, Any]]:
    """The drain's migration jobs (id, op, status, ...) as luxid shows them now."""
    (status,) = [d for d in stack.lc.query_drains() if d.target == target]
    return [j for j in drain_jobs(stack, status) if j["op"]["OP_ID"] == "OP_INSTANCE_MIGRATE"]


def holding(stack: Stack, *locks: str) -> WConfdClient:
    """A wconfd client holding `locks` exclusively (free them with free_locks)."""
    holder = WConfdClient(stack.wconfd.socket, name="test-holder")
    holder.update_locks_waiting([[name, "exclusive"] for name in locks], timeout=30)
    return holder


def test_update_keeps_started_at_and_gives_queued_moves_the_new_priority(stack: Stack) -> None:
    three_on_n1(stack)
    holder = holding(stack, "node-res/n2")  # the first move waits for it, the others queue
    try:
        started = stack.lc.drain_node(
            node="n1", deadline=600, max_parallel=3, priority=0, message="first"
        )
        stack.until(
            lambda: sorted(j["status"] for j in moves_of(stack)) == ["queued", "queued", "waiting"],
            timeout=30,
        )
        queued = [j["id"] for j in moves_of(stack) if j["status"] == "queued"]
        assert {stack.field(i, "pending_reason") for i in queued} == {"max running jobs reached"}

        before = time.time()
        updated = stack.lc.drain_node(
            node="n1", deadline=7200, max_parallel=2, priority=-5, message="second"
        )
        assert updated.status == "draining" and updated.started_at == started.started_at
        (listed,) = [d for d in stack.lc.query_drains() if d.target == "node/n1"]
        assert listed.started_at == started.started_at
        assert (listed.max_parallel, listed.message) == (2, "second")
        assert (
            listed.deadline is not None and before + 7200 <= listed.deadline <= time.time() + 7200
        )
        rows = stack.lc.query_jobs(
            ids=[j["id"] for j in moves_of(stack)], fields=["status", "priority"]
        )
        assert sorted(tuple(r) for r in rows if r is not None) == [
            ("queued", -5), ("queued", -5), ("waiting", -5)
        ]  # fmt: skip
    finally:
        holder.free_locks()
        holder.close()
    done, events = follow(stack, "node/n1", lambda s: s.status == "complete")
    assert done.started_at == started.started_at and set(placed(stack).values()) == {"n2"}
    strategies = [m for m in messages(events) if m.startswith("drain strategy set")]
    assert len(strategies) == 2 and strategies[1].endswith(", max_parallel 2)")


def test_cancel_cancels_queued_moves_and_lets_the_running_one_finish(slow_moves: Stack) -> None:
    stack = slow_moves
    three_on_n1(stack)
    stack.lc.drain_node(node="n1", deadline=None, max_parallel=3)
    follow(stack, "node/n1", lambda s: s.running == 1 and len(s.jobs) == 4)
    moves = moves_of(stack)
    assert sorted(j["status"] for j in moves) == ["queued", "queued", "running"]
    (running,) = [j["id"] for j in moves if j["status"] == "running"]

    canceled = stack.lc.cancel_node_drain(node="n1")
    assert canceled.status == "canceled" and canceled.completed_at is not None
    assert stack.status(running) == "running", "the move ended before the cancel"
    finals = {j["id"]: stack.wait_final(j["id"], timeout=60) for j in moves}
    assert finals.pop(running) == "success"
    assert list(finals.values()) == ["canceled", "canceled"]
    (opexec, opend) = (stack.field(running, f)[0] for f in ("opexec", "opend"))
    assert opend - opexec >= MOVE_SECONDS * 0.9  # it ran its course after the cancel
    (undrain,) = [j for j in drain_jobs(stack, canceled) if j["op"].get("drained") is False]
    assert stack.wait_final(undrain["id"], timeout=60) == "success"
    assert stack.wc.get_object(kind="node", key="n1")["drained"] is False

    done, events = follow(
        stack, "node/n1", lambda s: s.running == 0, until_event="n1: marked not drained"
    )
    assert done.status == "canceled"
    name = stack.field(running, "ops")[0]["instance_name"]  # only the running move's
    assert placed(stack) == {f"vm{i}": "n2" if f"vm{i}" == name else "n1" for i in range(3)}
    text = messages(events)
    assert text.count("drain canceled") == 1
    after = text[text.index("drain canceled") + 1 :]
    # After the cancel only its consequences: the queued moves canceled, the running one
    # finished, the node marked not drained; no move is submitted any more.
    assert not any(" submitted" in t and "migration" in t for t in after), after
    assert sum(t.endswith(f"migration job {i} canceled") for t in after for i in finals) == 2
    assert f"{name}: migrated to n2" in after and after[-1] == "n1: marked not drained"


def test_an_instance_placed_while_the_first_job_waited_is_drained_too(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"))
    ok(stack, create("vm", 256, "n1"))
    holder = holding(stack, "instance/late", "node/n1")
    try:
        started = stack.lc.drain_node(node="n1", deadline=None)
        assert started.total == 1
        (mark,) = started.jobs  # OP_NODE_SET_PARAMS drained: true, waiting for node/n1
        stack.wait_status(mark, "waiting")
        n1 = stack.wc.get_object(kind="node", key="n1")["uuid"]
        holder.add_object(
            kind="instance",
            object={"name": "late", "primary_node": n1, "memory": 256, "admin_state": "up"},
        )
    finally:
        holder.free_locks()
        holder.close()
    assert stack.wait_final(mark) == "success"
    done, _ = follow(stack, "node/n1", lambda s: s.status == "complete")
    assert done.total == 2 and placed(stack) == {"vm": "n2", "late": "n2"}
    migrated = sorted(j["op"]["instance_name"] for j in moves_of(stack))
    assert migrated == ["late", "vm"]


def test_a_blocked_drain_resumes_when_a_drained_node_is_undrained(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"))
    ok(stack, create("vm", 1024, "n1"))
    ok(stack, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n2", "drained": True})
    stack.lc.drain_node(node="n1", deadline=None)
    blocked, _ = follow(stack, "node/n1", lambda s: bool(s.blocked))
    ((what, _why),) = blocked.blocked
    assert what == "vm" and placed(stack) == {"vm": "n1"}
    ok(stack, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n2", "drained": False})
    done, _ = follow(stack, "node/n1", lambda s: s.status == "complete")
    assert done.blocked == [] and placed(stack) == {"vm": "n2"}
