"""Properties of luxid.takeover (docs/contracts.md#replicated-control-plane): what a new master
makes of the old master's jobs, over random job histories built with the real transitions."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from luxid.jobs import (
    Job,
    finish_opcode,
    is_finalized,
    job_status,
    mark_opcode_running,
    mark_opcode_waiting,
    new_job,
    pause_job,
    start_job,
)
from luxid.jobs.model import active_op_index
from luxid.takeover import MASTER_FAILOVER, take_over, take_over_job

NOW = 5000.0


@st.composite
def histories(draw: st.DrawFn) -> Job:
    """A job after a random prefix of its life on the old master."""
    count = draw(st.integers(1, 4))
    job = new_job(1, [{"OP_ID": "OP_TEST_DELAY", "duration": 0}] * count, 1000.0)
    t = 1001.0
    if draw(st.booleans()):
        job = start_job(job, t, 4242, 1.0)
        for index in range(count):
            step = draw(st.sampled_from(["stop", "wait", "run", "finish", "pause"]))
            if step == "stop":
                break
            if step == "pause":
                job = pause_job(job)
                break
            job = mark_opcode_waiting(job, index, t)
            if step == "wait":
                break
            job = mark_opcode_running(job, index, t)
            if step == "run":
                break
            job = finish_opcode(job, index, t, draw(st.booleans()))
            if is_finalized(job):
                break
    return job


@settings(max_examples=300)
@given(histories(), st.booleans())
def test_takeover_never_restarts_a_started_opcode(job: Job, gate_only: bool) -> None:
    started = {i for i, op in enumerate(job.ops) if op.exec_ts is not None}
    gates = frozenset(started)
    # A gate may exist whose "running" state the old master never showed anyone.
    if gate_only and not started and job.process_id is not None:
        gates = frozenset({0})
    new = take_over_job(job, gates, NOW)
    if is_finalized(job) or job.process_id is None:
        assert new is job  # finished and queued jobs carry on unchanged
        return
    assert new.process_id is None or is_finalized(new)
    if gates and not (job.paused and active_op_index(job) is None):
        assert job_status(new) == "error"
        unfinished = [op for op in job.ops if not is_finalized_op(op.status)]
        assert all(new.ops[i].result == MASTER_FAILOVER for i, op in enumerate(job.ops)
                   if op in unfinished)  # fmt: skip
    elif not gates:
        assert job_status(new) == "queued"
        assert all(op.exec_ts is None for op in new.ops)
    # Finished opcodes keep their outcome whatever happens.
    for old_op, new_op in zip(job.ops, new.ops, strict=True):
        if is_finalized_op(old_op.status):
            assert new_op == old_op


def is_finalized_op(status: str) -> bool:
    return status in ("success", "error", "canceled")


@given(st.lists(histories(), max_size=5))
def test_take_over_returns_exactly_the_changed_jobs(jobs: list[Job]) -> None:
    jobs = [j.__class__(**{**{f: getattr(j, f) for f in j.__struct_fields__}, "id": i + 1})
            for i, j in enumerate(jobs)]  # fmt: skip
    gates = {(j.id, i) for j in jobs for i, op in enumerate(j.ops) if op.exec_ts is not None}
    changed = take_over(jobs, gates, NOW)
    expected = [
        take_over_job(j, frozenset(i for jid, i in gates if jid == j.id), NOW) for j in jobs
    ]
    assert changed == [new for old, new in zip(jobs, expected, strict=True) if new is not old]
