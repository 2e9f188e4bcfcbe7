"""Node drains (docs/contracts.md#node-drain) through the real daemons: wconfd + luxid + job
processes.

Each test builds a small cluster with OP_NODE_ADD / OP_INSTANCE_CREATE jobs, drains a node
with `drain_node` and follows it with `wait_for_drain_change` (event-driven, no polling),
then checks the cluster and the drain's jobs as luxid and wconfd show them.  A node's
lock held by an OP_TEST_DELAY job is how a test keeps moves waiting (queued or waiting at
a deadline, under way when luxid is killed).
"""

from __future__ import annotations

import sys
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay
from test_jobproc_opcodes import run as ok

from client import WConfdClient, errors
from client.api.luxi import DrainStatus

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def stack(daemon_factory: Any) -> Any:
    s = Stack(daemon_factory)
    yield s
    s.close()


def add_node(name: str, mtotal: int = 65536) -> dict[str, Any]:
    return {"OP_ID": "OP_NODE_ADD", "node_name": name, "mtotal": mtotal}


def create(name: str, memory: int, pnode: str) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "memory": memory,
            "vcpus": 1, "disks": [{"size": 1024}], "pnode": pnode}  # fmt: skip


def placed(stack: Stack) -> dict[str, str]:
    """instance name -> primary node name, from wconfd."""
    nodes = {n["uuid"]: n["name"] for n in stack.wc.list_objects(kind="node")}
    return {i["name"]: nodes[i["primary_node"]] for i in stack.wc.list_objects(kind="instance")}


def follow(
    stack: Stack,
    target: str,
    accept: Callable[[DrainStatus], bool],
    timeout: float = 60.0,
    *,
    until_event: str | None = None,
) -> tuple[DrainStatus, list[list[Any]]]:
    """Follow a drain with wait_for_drain_change until `accept(status)` (and, with
    `until_event`, until an event with that text was seen); (status, events)."""
    deadline = time.monotonic() + timeout
    since = 0
    events: list[list[Any]] = []
    last: DrainStatus | None = None
    while time.monotonic() < deadline:
        change = stack.lc.wait_for_drain_change(
            target=target, since_event=since, timeout=min(5.0, deadline - time.monotonic())
        )
        if isinstance(change, str):
            continue
        last = change.status
        events += change.events
        since = max([since, *(int(event[0]) for event in change.events)])
        if accept(last) and (until_event is None or until_event in messages(events)):
            return last, events
    raise AssertionError(f"{target}: still {last} after {timeout} s; events {events}")


def drain_jobs(stack: Stack, status: DrainStatus) -> list[dict[str, Any]]:
    """The drain's jobs with their first opcode, status and timestamps, by id."""
    rows = stack.lc.query_jobs(
        ids=status.jobs, fields=["id", "ops", "status", "start_ts", "end_ts", "opresult"]
    )
    return [
        {"id": r[0], "op": r[1][0], "status": r[2], "start": r[3], "end": r[4], "result": r[5]}
        for r in rows
        if r is not None
    ]


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    """The most intervals open at one time."""
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def messages(events: list[list[Any]]) -> list[str]:
    return [str(event[2]) for event in events]


def test_drain_moves_every_instance_within_max_parallel(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"), add_node("n3"))
    ok(stack, *(create(f"web{i}", 512, "n1") for i in range(6)))
    started = stack.lc.drain_node(node="n1", deadline=600, max_parallel=2, message="kernel")
    assert started.status == "draining" and started.total == 6 and started.mode is None
    done, events = follow(stack, "node/n1", lambda s: s.status == "complete")
    assert done.remaining == 0 and done.total == 6 and not done.deadline_reached
    assert done.completed_at is not None and done.started_at == started.started_at
    assert set(placed(stack).values()) <= {"n2", "n3"}
    node = stack.wc.get_object(kind="node", key="n1")
    assert node["drained"] is True  # a node stays drained after its drain
    jobs = drain_jobs(stack, done)
    first, *moves = jobs
    assert first["op"]["OP_ID"] == "OP_NODE_SET_PARAMS" and first["op"]["drained"] is True
    assert first["op"]["priority"] == -20
    assert all(j["op"]["OP_ID"] == "OP_INSTANCE_MIGRATE" for j in moves)
    assert all(j["status"] == "success" for j in jobs)
    assert Counter(j["op"]["instance_name"] for j in moves) == {f"web{i}": 1 for i in range(6)}
    # nothing moved before the node was marked drained; never more than 2 moves at once
    assert min(j["start"] for j in moves) >= first["end"]
    assert max_overlap([(j["start"], j["end"]) for j in moves]) <= 2
    for job in moves:
        (reason,) = [r for r in job["op"]["reason"] if r[0] == "lw:drain"]
        assert reason[1] == "rate-limit:2:drain-n1"
    text = messages(events)
    assert text[0].startswith("drain strategy set (deadline ")
    assert any(t.startswith("web0: migration job ") and t.endswith(" submitted") for t in text)
    assert any(t.startswith("web0: migrated to n") for t in text)
    assert text[-1] == "all instances moved; drain complete"
    (listed,) = [d for d in stack.lc.query_drains() if d.target == "node/n1"]
    assert listed.status == "complete" and listed.jobs == done.jobs


def test_a_node_without_instances_completes_at_once(stack: Stack) -> None:
    ok(stack, add_node("n1"))
    stack.lc.drain_node(node="n1", deadline=None)
    done, _ = follow(stack, "node/n1", lambda s: s.status == "complete", timeout=20)
    assert done.total == 0 and done.deadline is None


def test_errors_name_what_is_wrong(stack: Stack) -> None:
    ok(stack, add_node("n1"))
    with pytest.raises(errors.NotFound, match="nope"):
        stack.lc.drain_node(node="nope")
    with pytest.raises(errors.InvalidParams, match="max_parallel"):
        stack.lc.drain_node(node="n1", max_parallel=0)
    with pytest.raises(errors.InvalidParams, match="deadline"):
        stack.lc.drain_node(node="n1", deadline=-1)
    with pytest.raises(errors.NotFound, match="never drained"):
        stack.lc.cancel_node_drain(node="n1")
    with pytest.raises(errors.InvalidParams, match="target"):
        stack.lc.wait_for_drain_change(target="n1", since_event=0, timeout=0)
    with pytest.raises(errors.NotFound):
        stack.lc.wait_for_drain_change(target="node/n1", since_event=0, timeout=0)


def test_blocked_drain_completes_when_a_node_is_added(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2", mtotal=2048))
    ok(stack, create("small", 1024, "n1"), create("big", 4096, "n1"))
    stack.lc.drain_node(node="n1", deadline=None, max_parallel=2)
    blocked, events = follow(stack, "node/n1", lambda s: bool(s.blocked) and s.remaining == 1)
    ((what, why),) = blocked.blocked
    assert what == "big" and str(why).startswith("no node has room for big: it needs 4096 MiB")
    assert any(m.startswith("big: blocked: no node has room for big") for m in messages(events))
    metrics = stack.lc.get_metrics()
    assert [{"target": "node/n1"}, 1] in metrics["lockwarden_drain_remaining"]
    assert [{"status": "draining"}, 1] in metrics["lockwarden_drains"]
    # Nothing is retried while nothing changes (no loop): the same jobs after a while.
    jobs_before = stack.lc.query_drains()[0].jobs
    ok(stack, delay(0.3))
    assert stack.lc.query_drains()[0].jobs == jobs_before
    ok(stack, add_node("n3"))  # room appears: the drain resumes by itself
    done, _ = follow(stack, "node/n1", lambda s: s.status == "complete")
    assert done.blocked == [] and placed(stack) == {"small": "n2", "big": "n3"}
    metrics = stack.lc.get_metrics()
    assert [{"status": "complete"}, 1] in metrics["lockwarden_drains"]
    assert all(labels["target"] != "node/n1" for labels, _ in metrics["lockwarden_drain_remaining"])


def test_several_drains_at_once_never_move_onto_each_other(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"), add_node("n3"))
    ok(stack, *(create(f"a{i}", 256, "n1") for i in range(3)))
    ok(stack, *(create(f"b{i}", 256, "n2") for i in range(3)))
    stack.lc.drain_node(node="n1", deadline=None, max_parallel=3)
    stack.lc.drain_node(node="n2", deadline=None, max_parallel=1)
    for target in ("node/n1", "node/n2"):
        follow(stack, target, lambda s: s.status == "complete")
    assert set(placed(stack).values()) == {"n3"}
    migrations = [
        op["instance_name"]
        for (ops,) in stack.lc.query_jobs(ids=None, fields=["ops"])
        for op in ops
        if op["OP_ID"] == "OP_INSTANCE_MIGRATE"
    ]
    assert sorted(migrations) == sorted(placed(stack))  # each instance moved once


def test_deadline_cancels_queued_moves_fails_over_and_shuts_down(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2", mtotal=4096))
    ok(stack, *(create(f"vm{i}", 1024, "n1") for i in range(3)), create("huge", 8192, "n1"))
    # n2's lock is busy: the first migration waits for it, the others queue behind the bucket
    holder = stack.submit(delay(2.5, on_nodes=["n2"]))
    stack.wait_op_running(holder)
    started = stack.lc.drain_node(node="n1", deadline=1.0, max_parallel=1)
    done, events = follow(stack, "node/n1", lambda s: s.status != "draining", timeout=90)
    assert done.status == "complete" and done.deadline_reached
    assert done.shut_down == ["huge"] and done.remaining == 1
    assert placed(stack) == {"vm0": "n2", "vm1": "n2", "vm2": "n2", "huge": "n1"}
    huge = stack.wc.get_object(kind="instance", key="huge")
    assert huge["admin_state"] == "down"
    jobs = drain_jobs(stack, done)
    kinds = Counter((j["op"]["OP_ID"], j["status"]) for j in jobs)
    assert kinds[("OP_INSTANCE_MIGRATE", "canceled")] >= 1
    assert kinds[("OP_INSTANCE_FAILOVER", "success")] == 3
    assert kinds[("OP_INSTANCE_SHUTDOWN", "success")] == 1
    text = messages(events)
    fired = next(e for e in events if str(e[2]).startswith("deadline passed"))
    assert started.deadline is not None and 0 <= fired[1] - started.deadline < 1.0
    assert any(t.startswith("huge: no node can take it: no node has room for huge") for t in text)
    assert text[-1] == "deadline reached: 3 instances failed over, 1 shut down"


def test_luxid_kill9_mid_drain_resumes_without_moving_twice(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"))
    ok(stack, *(create(f"db{i}", 512, "n1") for i in range(4)))
    holder = stack.submit(delay(2.0, on_nodes=["n2"]))
    stack.wait_op_running(holder)
    started = stack.lc.drain_node(node="n1", deadline=3600, max_parallel=2)
    follow(stack, "node/n1", lambda s: s.running >= 1 or len(s.jobs) >= 3)
    stack.restart_luxid(kill=True)
    stack.lc = type(stack.lc)(stack.luxid.socket, timeout=30)
    done, _ = follow(stack, "node/n1", lambda s: s.status == "complete", timeout=90)
    assert done.deadline == started.deadline and done.started_at == started.started_at
    assert set(placed(stack).values()) == {"n2"}
    migrations = Counter(
        op["instance_name"]
        for (ops, status) in stack.lc.query_jobs(ids=None, fields=["ops", "status"])
        for op in ops
        if op["OP_ID"] == "OP_INSTANCE_MIGRATE" and status == "success"
    )
    assert migrations == {f"db{i}": 1 for i in range(4)}


def test_a_deadline_passed_while_luxid_was_down_fires_at_start(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"))
    ok(stack, create("vm", 512, "n1"))
    holder = stack.submit(delay(60, on_nodes=["n2"]))
    stack.wait_op_running(holder)
    started = stack.lc.drain_node(node="n1", deadline=1.0)
    follow(stack, "node/n1", lambda s: bool(s.jobs) and s.running + len(s.jobs) >= 2)
    stack.lc.close()
    stack.luxid.kill()
    assert started.deadline is not None
    time.sleep(max(0.0, started.deadline - time.time()) + 0.3)
    stack.luxid.start()
    stack.lc = type(stack.lc)(stack.luxid.socket, timeout=30)
    stack.lc.cancel_job(job_id=holder)  # let the failover have n2
    done, events = follow(stack, "node/n1", lambda s: s.status != "draining", timeout=90)
    assert done.deadline_reached and done.deadline == started.deadline
    assert placed(stack) == {"vm": "n2"}
    assert any(str(m).startswith("deadline passed") for m in messages(events))


def test_moves_waiting_for_their_locks_count_as_running(stack: Stack) -> None:
    """`running` counts the drain's jobs that started and have not ended, waiting for
    their locks included (two moves blocked by a client holding the target node)."""
    ok(stack, add_node("n1"), add_node("n2"))
    ok(stack, create("a", 512, "n1"), create("b", 512, "n1"))
    holder = WConfdClient(stack.wconfd.socket, name="holder")
    assert holder.try_update_locks([["node/n2", "exclusive"]]) == []
    try:
        stack.lc.drain_node(node="n1", max_parallel=2)
        _, events = follow(stack, "node/n1", lambda s: len(s.jobs) == 3)
        moves = [int(m.split()[3]) for m in messages(events) if "migration job" in m]

        def statuses() -> list[str]:
            return [row[0] for row in stack.lc.query_jobs(ids=moves, fields=["status"]) if row]

        stack.until(lambda: statuses() == ["waiting", "waiting"], timeout=30)
        (drain,) = stack.lc.query_drains()
        assert (drain.running, drain.remaining) == (2, 2)
    finally:
        holder.free_locks()
        holder.close()
    done, _ = follow(stack, "node/n1", lambda s: s.status == "complete")
    assert done.running == 0 and placed(stack) == {"a": "n2", "b": "n2"}
