"""The counts behind the gauges, kept incrementally where things change, always equal
what a full recount of the state would give (and the change serial's wait semantics).

- wconfd: `Allocation.held_counts` (lockwarden_locks_held) and `LockManager.pending_count`
  (lockwarden_lock_requests_pending) under any sequence of lock operations;
- luxid: `JobMetrics` (lockwarden_jobs, jobs_finished_total, the job histograms) under
  any sequence of job transitions, drops and reloads;
- `ChangeSerial`: a waiter is woken by the change, never before; a timeout keeps it.
"""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from client import errors
from client._server.change_serial import ChangeSerial
from client._server.metrics import Registry
from luxid.job_metrics import JobMetrics
from luxid.jobs import (
    Job,
    fail_job,
    finish_opcode,
    is_finalized,
    job_status,
    mark_canceled,
    mark_opcode_running,
    new_job,
    set_pending_reason,
    start_job,
)
from wconfd.locking import LEVELS, LockManager

OWNERS = ("a", "b", "c")
NAMES = ("cluster/BGL", "instance/i1", "node/n1", "node/n2", "node/[lockset]", "network/x")
MODES = ("shared", "exclusive", "release")

lock_ops = st.lists(
    st.tuples(
        st.sampled_from(("try", "wait", "free", "downgrade", "remove")),
        st.sampled_from(OWNERS),
        st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(MODES)), max_size=3),
    ),
    max_size=40,
)


def recount(manager: LockManager) -> list[dict[str, int]]:
    counts = [{"shared": 0, "exclusive": 0} for _ in LEVELS]
    for locks in manager.held().values():
        for name, mode in locks:
            counts[LEVELS.index(name.partition("/")[0])][mode] += 1
    return counts


@settings(max_examples=300, deadline=None)
@given(lock_ops)
def test_lock_counts_equal_a_recount(ops: list[tuple[str, str, list[tuple[str, str]]]]) -> None:
    manager = LockManager()
    for op, owner, pairs in ops:
        request = [list(p) for p in pairs]
        try:
            if op == "try":
                manager.try_update(owner, request)
            elif op == "wait":
                manager.update_waiting(owner, request, since=0.0)
            elif op == "free":
                manager.free_locks(owner)
            elif op == "downgrade":
                manager.downgrade_locks_level(owner, "node")
            else:
                manager.remove_owner(owner)
        except errors.RpcError:
            pass  # refused (order, deadlock, pending, bad request): nothing changed
        assert manager.allocation.held_counts == recount(manager)
        waiting = sum(manager.pending_request(o) is not None for o in OWNERS)
        assert manager.pending_count == waiting


job_steps = st.lists(
    st.tuples(
        st.integers(1, 5),
        st.sampled_from(("start", "run", "succeed", "fail", "cancel", "drop", "touch")),
    ),
    max_size=40,
)


def transition(job: Job, step: str, now: float) -> Job:
    """One job transition as luxid makes it (InvalidParams where it is not allowed)."""
    if step == "start":
        return start_job(job, now, 4242, 1.0) if job.start_ts is None else job
    if step == "run":
        return mark_opcode_running(job, 0, now) if job.start_ts is not None else job
    if step == "succeed":
        return finish_opcode(job, 0, now, True) if job.start_ts is not None else job
    if step == "fail":
        return fail_job(job, now, "boom")
    return mark_canceled(job, now)


def values(registry: Registry, name: str) -> dict[Any, Any]:
    return dict(registry.metrics[name].values)


@settings(max_examples=300, deadline=None)
@given(job_steps)
def test_job_metrics_follow_every_change(steps: list[tuple[int, str]]) -> None:
    registry = Registry("luxid")
    metrics = JobMetrics(registry)
    live: dict[int, Job] = {}
    finished: Counter[str] = Counter()
    started = 0
    ended_after_start = 0
    now = 1000.0
    for job_id, step in steps:
        now += 1.0
        old = live.get(job_id)
        if old is None:
            new = new_job(job_id, [{"OP_ID": "OP_TEST_DELAY", "duration": 0}], now)
            metrics.submitted(1)
        elif step == "drop":
            metrics.recount(live.pop(job_id), None)
            continue
        elif step == "touch":  # a new version, same status (finalized jobs too)
            new = set_pending_reason(old, f"at {now}")
        elif is_finalized(old):
            continue
        else:
            try:
                new = transition(old, step, now)
            except errors.InvalidParams:
                continue  # not allowed in this state: nothing changed
        if new is old:
            continue
        metrics.changed(old, new)
        live[job_id] = new
        if old is not None and old.start_ts is None and new.start_ts is not None:
            started += 1
        if is_finalized(new) and (old is None or not is_finalized(old)):
            finished[job_status(new)] += 1
            ended_after_start += new.start_ts is not None
    assert {k[0]: v for k, v in values(registry, "lockwarden_jobs").items() if v} == dict(
        Counter(job_status(j) for j in live.values())
    )
    assert {
        k[0]: v for k, v in values(registry, "lockwarden_jobs_finished_total").items() if v
    } == (dict(finished))
    queue = registry.histogram("lockwarden_job_queue_seconds").values
    run = registry.histogram("lockwarden_job_run_seconds").values
    assert sum(sum(s[0]) for s in queue.values()) == started
    assert sum(sum(s[0]) for s in run.values()) == ended_after_start


def test_a_change_serial_wakes_its_waiters_only_at_a_change() -> None:
    async def go() -> None:
        serial = ChangeSerial()
        first = serial.value
        assert await serial.wait(first - 1, 10) == first  # differs already: at once
        assert await serial.wait(first, 0) == first  # a read
        assert await serial.wait(first, 0.01) == first  # the timeout keeps the serial
        waiters = [asyncio.ensure_future(serial.wait(first, 10)) for _ in range(3)]
        await asyncio.sleep(0)
        assert not any(w.done() for w in waiters)
        serial.bump()
        assert await asyncio.gather(*waiters) == [first + 1] * 3

    asyncio.run(go())
