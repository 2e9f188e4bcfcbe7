"""Job transitions: opcode progress, logs, cancel, death, pause, priority (vectors 33, 34)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client import errors
from luxid.jobs import (
    FINALIZED,
    MSG_CANCELED,
    MSG_PRECEDING_FAILED,
    Job,
    OpCode,
    active_op_index,
    add_log,
    cancel_job,
    change_priority,
    fail_job,
    finish_opcode,
    is_finalized,
    job_status,
    log_entries_since,
    mark_canceled,
    mark_opcode_running,
    mark_opcode_waiting,
    new_job,
    next_op_index,
    pause_job,
    process_exited,
    requeue_opcode,
    set_archived,
    start_job,
    unpause_job,
)

Q, W, R, CI, CD, S, E = "queued", "waiting", "running", "canceling", "canceled", "success", "error"


def mk(statuses: list[str], prios: list[int] | None = None, **kw: Any) -> Job:
    """A job with one opcode per status (and priority)."""
    prios = prios or [0] * len(statuses)
    ops = tuple(
        OpCode(input={"OP_ID": "OP_TEST_DELAY", "duration": 0}, status=s, priority=p)  # type: ignore[arg-type]
        for s, p in zip(statuses, prios, strict=True)
    )
    return Job(id=kw.pop("id", 1), ops=ops, received_ts=0.0, **kw)


def fresh(n_ops: int = 3, job_id: int = 7) -> Job:
    return new_job(job_id, [{"OP_ID": "OP_TEST_DELAY", "duration": 0}] * n_ops, now=100.0)


def started(n_ops: int = 3) -> Job:
    return start_job(fresh(n_ops), 101.0, pid=4242, pid_start=99.5)


# ------------------------------------------------------------------ happy path


def test_full_run_of_a_job() -> None:
    job = started(2)
    assert job.process_id == 4242 and job.process_start == 99.5 and job.start_ts == 101.0
    assert job_status(job) == R
    job = mark_opcode_waiting(job, 0, 102.0)
    assert job_status(job) == W and job.ops[0].start_ts == 102.0
    job = mark_opcode_running(job, 0, 103.0)
    assert job_status(job) == R and job.ops[0].exec_ts == 103.0
    job = add_log(job, 0, 103.5, "message", "hello")
    job = finish_opcode(job, 0, 104.0, True, {"answer": 42})
    assert job_status(job) == R, "between opcodes the job stays running"
    assert job.end_ts is None
    job = mark_opcode_running(job, 1, 105.0)
    assert job.ops[1].start_ts == 105.0
    job = add_log(job, 1, 105.5, "message", "second")
    job = finish_opcode(job, 1, 106.0, True, None)
    assert job_status(job) == S and job.end_ts == 106.0
    assert [e.serial for op in job.ops for e in op.log] == [1, 2]
    assert job.ops[0].result == {"answer": 42}
    assert log_entries_since(job, 1) == [[2, 105.5, "message", "second"]]
    assert log_entries_since(job, None) == [
        [1, 103.5, "message", "hello"],
        [2, 105.5, "message", "second"],
    ]


def test_transitions_do_not_modify_their_input() -> None:
    job = started(2)
    snapshot = msgspec.msgpack.encode(job)
    mark_opcode_running(job, 0, 1.0)
    add_log(job, 0, 1.0, "message", "x")
    cancel_job(job, 1.0)
    fail_job(job, 1.0, "boom")
    change_priority(job, -3)
    assert msgspec.msgpack.encode(job) == snapshot


def test_error_fails_the_remaining_opcodes_and_keeps_successes() -> None:
    job = mark_opcode_running(started(4), 0, 1.0)
    job = finish_opcode(job, 0, 2.0, True, "ok")
    job = mark_opcode_running(job, 1, 3.0)
    job = finish_opcode(job, 1, 4.0, False, ["OpExecError", ["disk on fire"]])
    assert [op.status for op in job.ops] == [S, E, E, E]
    assert [op.result for op in job.ops[2:]] == [MSG_PRECEDING_FAILED] * 2
    assert job.ops[0].result == "ok"
    assert job_status(job) == E and job.end_ts == 4.0


def test_opcodes_must_run_in_order() -> None:
    job = started(3)
    with pytest.raises(errors.InvalidParams):
        mark_opcode_running(job, 1, 1.0)
    with pytest.raises(errors.InvalidParams):
        finish_opcode(job, 2, 1.0, True)
    with pytest.raises(errors.InvalidParams):
        mark_opcode_running(job, 5, 1.0)
    done = finish_opcode(mark_opcode_running(job, 0, 1.0), 0, 2.0, True)
    with pytest.raises(errors.InvalidParams):
        mark_opcode_running(done, 0, 3.0)


def test_retry_running_to_waiting_and_requeue() -> None:
    job = mark_opcode_running(started(1), 0, 1.0)
    job = mark_opcode_waiting(job, 0, 2.0)
    assert job.ops[0].status == W and job.ops[0].start_ts == 1.0
    job = requeue_opcode(job, 0)
    assert job.ops[0].status == Q


def test_log_serials_are_global_per_job_and_increasing() -> None:
    job = started(3)
    for i, index in enumerate([0, 2, 1, 0, 2]):
        job = add_log(job, index, float(i), "message", f"m{i}")
    serials = [e[0] for e in log_entries_since(job, None)]
    assert serials == [1, 2, 3, 4, 5]
    assert job.log_serial == 5
    assert [e.serial for e in job.ops[0].log] == [1, 4]
    with pytest.raises(errors.InvalidParams):
        add_log(job, 3, 1.0, "message", "x")
    with pytest.raises(errors.InvalidParams):
        add_log(mk([S]), 0, 1.0, "message", "too late")


# ----------------------------------------------------------------- vector 34


def test_cancel_queued_job() -> None:
    out = cancel_job(fresh(2), 50.0)
    assert out.ok and out.signal is None
    assert [op.status for op in out.job.ops] == [CD, CD]
    assert [op.result for op in out.job.ops] == [MSG_CANCELED] * 2
    assert out.job.end_ts == 50.0 and out.job.start_ts is None
    assert job_status(out.job) == CD


def test_cancel_waiting_job_is_immediate_and_terms_the_process() -> None:
    job = mark_opcode_waiting(started(2), 0, 1.0)
    out = cancel_job(job, 2.0)
    assert out.ok and out.signal == "TERM"
    assert job_status(out.job) == CD and out.job.end_ts == 2.0


def test_cancel_running_job_goes_canceling_then_canceled() -> None:
    job = mark_opcode_running(started(3), 0, 1.0)
    out = cancel_job(job, 2.0)
    assert out.ok and out.signal == "TERM"
    assert [op.status for op in out.job.ops] == [CI, CI, CI]
    assert job_status(out.job) == CI and out.job.end_ts is None
    again = cancel_job(out.job, 2.5)
    assert not again.ok and again.job is out.job
    # the job process finishes the interruptible opcode and acknowledges at a safe point
    job = finish_opcode(out.job, 0, 3.0, True, None)
    assert job_status(job) == CI
    job = mark_canceled(job, 4.0)
    assert [op.status for op in job.ops] == [S, CD, CD]
    assert job_status(job) == CD and job.end_ts == 4.0


def test_cancel_between_opcodes() -> None:
    job = finish_opcode(mark_opcode_running(started(2), 0, 1.0), 0, 2.0, True)
    out = cancel_job(job, 3.0)
    assert out.signal == "TERM" and [op.status for op in out.job.ops] == [S, CI]


def test_kill_running_job_marks_error_killed() -> None:
    job = mark_opcode_running(started(2), 0, 1.0)
    out = cancel_job(job, 2.0, kill=True)
    assert out.ok and out.signal == "KILL"
    assert job_status(out.job) == E and out.job.ops[0].result == "killed"
    # canceling jobs can still be killed
    canceling = cancel_job(job, 2.0).job
    assert cancel_job(canceling, 3.0, kill=True).signal == "KILL"


def test_cancel_finalized_job_is_refused() -> None:
    done = mk([S, S])
    out = cancel_job(done, 1.0)
    assert not out.ok and out.job is done and "finished" in out.message


# ------------------------------------------------------------------- vector 33


@pytest.mark.parametrize(
    ("statuses", "prio", "ok", "message", "after"),
    [
        ([Q, Q, Q, Q], -10, True, "Priorities of pending opcodes for job {} have been changed to -10", [-10] * 4),
        ([S, S, S, E], 5, False, "Job {} is finished", [0] * 4),
        ([S, S, CI, CI], 5, False, "Job {} is cancelling", [0] * 4),
        ([R, Q, Q, Q], 7, True, "Priorities of pending opcodes for job {} have been changed to 7", [0, 7, 7, 7]),
        ([S, S, S, R], 3, False, "Job {} had no pending opcodes", [0] * 4),
        ([S, R, Q, Q], -19, True, "Priorities of pending opcodes for job {} have been changed to -19", [0, 0, -19, -19]),
        ([S, W, Q], 2, True, "Priorities of pending opcodes for job {} have been changed to 2", [0, 2, 2]),
    ],
)  # fmt: skip
def test_change_priority_vector_33(
    statuses: list[str], prio: int, ok: bool, message: str, after: list[int]
) -> None:
    job = mk(statuses, id=24984)
    out = change_priority(job, prio)
    assert out.ok is ok
    assert out.message == message.format(24984)
    assert [op.priority for op in out.job.ops] == after


def test_change_priority_validates_and_notifies_running_jobs() -> None:
    with pytest.raises(errors.InvalidParams):
        change_priority(fresh(), 20)
    with pytest.raises(errors.InvalidParams):
        change_priority(fresh(), True)  # type: ignore[arg-type]
    assert not change_priority(fresh(), 3).notify
    assert change_priority(mark_opcode_running(started(), 0, 1.0), 3).notify


# ---------------------------------------------------------------- death, pause


def test_process_death_fails_the_job_with_a_reason() -> None:
    job = finish_opcode(mark_opcode_running(started(3), 0, 1.0), 0, 2.0, True, "r0")
    job = mark_opcode_running(job, 1, 3.0)
    dead = process_exited(job, 4.0)
    assert [op.status for op in dead.ops] == [S, E, E]
    assert dead.ops[1].result == "job process died"
    assert dead.ops[0].result == "r0"
    assert dead.ops[1].input["reason"][-1][:2] == [
        "lw:daemon:luxid:deathdetection",
        "job process died",
    ]
    assert dead.end_ts == 4.0 and dead.process_id == 4242
    # finalized jobs are not touched by a later exit
    assert process_exited(dead, 5.0) is dead


def test_pause_running_job_requeues_it_after_its_opcode() -> None:
    job = mark_opcode_running(started(3), 0, 1.0)
    job = pause_job(job)
    assert job.paused and job_status(job) == R, "finishes its current opcode first"
    job = finish_opcode(job, 0, 2.0, True)
    assert job_status(job) == Q, "back to queued between opcodes"
    job = process_exited(job, 3.0)
    assert job.process_id is None and job_status(job) == Q and job.paused
    # resumed later with a new process
    job = start_job(job, 10.0, pid=5555, pid_start=9.0)
    assert not job.paused and job.process_id == 5555 and job.start_ts == 101.0
    assert job_status(job) == R and next_op_index(job) == 1


def test_unpause_before_the_process_stopped() -> None:
    job = pause_job(mark_opcode_running(started(2), 0, 1.0))
    job = unpause_job(job)
    assert not job.paused
    assert unpause_job(job) is job


def test_start_job_refuses_finalized_or_active_jobs() -> None:
    with pytest.raises(errors.InvalidParams):
        start_job(mk([S]), 1.0, 1, 1.0)
    with pytest.raises(errors.InvalidParams):
        start_job(mark_opcode_running(started(), 0, 1.0), 2.0, 1, 1.0)


def test_archive_only_finalized() -> None:
    with pytest.raises(errors.InvalidParams):
        set_archived(fresh())
    assert set_archived(mk([S])).archived


# -------------------------------------------------- property: random job process

actions = st.lists(
    st.tuples(
        st.sampled_from(
            [
                "waiting",
                "running",
                "ok",
                "fail",
                "log",
                "cancel",
                "kill",
                "ack_cancel",
                "pause",
                "exit",
                "die",
                "prio",
                "start",
            ]
        ),
        st.integers(min_value=-20, max_value=19),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=1, max_value=5), actions)
def test_random_walk_keeps_the_invariants(n_ops: int, steps: list[tuple[str, int]]) -> None:
    """Whatever a job process and the operator do, the job stays consistent."""
    job = fresh(n_ops)
    now = 100.0
    last_serial = 0
    final_snapshot: bytes | None = None
    for action, value in steps:
        now += 1.0
        index = next_op_index(job)
        try:
            if action == "start" and job.process_id is None:
                job = start_job(job, now, pid=1000 + int(now), pid_start=now)
            elif action == "waiting" and index is not None:
                job = mark_opcode_waiting(job, index, now)
            elif action == "running" and index is not None:
                job = mark_opcode_running(job, index, now)
            elif action in ("ok", "fail") and index is not None:
                job = finish_opcode(job, index, now, action == "ok", value)
            elif action == "log":
                job = add_log(job, abs(value) % n_ops, now, "message", value)
            elif action in ("cancel", "kill"):
                job = cancel_job(job, now, kill=action == "kill").job
            elif action == "ack_cancel" and job_status(job) == CI:
                job = mark_canceled(job, now)
            elif action == "pause":
                job = pause_job(job)
            elif action == "exit" and job.process_id is not None:
                job = process_exited(job, now)
            elif action == "die":
                job = process_exited(job, now, "crashed")
            elif action == "prio":
                job = change_priority(job, value).job
        except errors.InvalidParams:
            continue  # refused transitions change nothing
        status = job_status(job)
        # invariants
        if final_snapshot is not None:
            assert msgspec.msgpack.encode(job) == final_snapshot, "finalized jobs never change"
        if status in FINALIZED:
            assert job.end_ts is not None and not job.paused
            assert active_op_index(job) is None or status == CI
            if final_snapshot is None:
                final_snapshot = msgspec.msgpack.encode(job)
        assert sum(op.status in (W, R) for op in job.ops) <= 1
        seen = [e[0] for e in log_entries_since(job, None)]
        assert seen == sorted(set(seen)) and (not seen or seen[-1] == job.log_serial)
        assert job.log_serial >= last_serial
        last_serial = job.log_serial
        # the statuses of opcodes are a prefix of finished ones followed by unfinished ones,
        # except that an error or cancel finalizes all later ones too
        finished = [op.status in FINALIZED for op in job.ops]
        assert finished == sorted(finished, reverse=True)
        if is_finalized(job):
            assert all(finished)
