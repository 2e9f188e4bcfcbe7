"""Status transitions of a job, as pure functions: each takes a Job and returns a new one.

They follow Ganeti's op transitions (jqueue.py) with Lockwarden's changes
(docs/contracts.md#jobs): failures keep finished opcodes `success` (Ganeti overwrote them
with error), a started job can be paused back to `queued`, waiting jobs are canceled at
once. Invalid transitions raise client.errors.InvalidParams so a confused job process cannot
corrupt a job.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec.structs import replace

from client import errors
from client.vocabulary import PRIORITY_MAX, PRIORITY_MIN
from luxid.jobs.model import (
    CANCELED,
    CANCELING,
    ERROR,
    FINALIZED,
    MSG_CANCELED,
    MSG_PRECEDING_FAILED,
    MSG_PROCESS_DIED,
    QUEUED,
    RUNNING,
    SUCCESS,
    WAITING,
    Job,
    LogEntry,
    OpCode,
    active_op_index,
    job_status,
    next_op_index,
)

Signal = Literal["TERM", "KILL"]

REASON_SOURCE_LUXID = "lw:daemon:luxid"


class Outcome(msgspec.Struct, frozen=True):
    """Result of a request-style transition (cancel, priority change).

    `ok`/`message` are the `[bool, message]` answer of the RPC. `signal` asks the shell to
    send SIGTERM/SIGKILL to the job process if it still lives; `notify` asks it to tell the
    job process that its opcode priorities changed.
    """

    job: Job
    ok: bool
    message: str
    signal: Signal | None = None
    notify: bool = False


def _set_op(job: Job, index: int, op: OpCode) -> Job:
    ops = list(job.ops)
    ops[index] = op
    return replace(job, ops=tuple(ops))


def _finish_bookkeeping(job: Job, now: float) -> Job:
    """Set end_ts and clear queue-only state once a job has become finalized."""
    if job_status(job) in FINALIZED and (
        job.end_ts is None or job.paused or job.pending_reason is not None
    ):
        return replace(
            job,
            end_ts=job.end_ts if job.end_ts is not None else now,
            paused=False,
            pending_reason=None,
        )
    return job


def _check_next(job: Job, index: int, what: str) -> OpCode:
    """The opcode at `index`, which must be the job's first unfinished one."""
    if not 0 <= index < len(job.ops):
        raise errors.InvalidParams(f"job {job.id} has no opcode {index}")
    expected = next_op_index(job)
    if expected != index:
        raise errors.InvalidParams(
            f"cannot {what} opcode {index} of job {job.id}: next unfinished opcode is {expected}"
        )
    return job.ops[index]


def _ns(now: float) -> int:
    return int(now * 1_000_000_000)


def _with_reason(op: OpCode, source: str, text: str, now: float) -> dict[str, Any]:
    """The op input with one more reason-trail entry (Ganeti appends one when failing a job)."""
    op_input = dict(op.input)
    op_input["reason"] = [*(op_input.get("reason") or []), [source, text, _ns(now)]]
    return op_input


# ------------------------------------------------------------------ luxid: process start


def start_job(job: Job, now: float, pid: int, pid_start: float) -> Job:
    """luxid gave the job a process (new or resumed after a pause); record its identity.

    Must happen before the process runs any opcode
    (docs/contracts.md#scheduling-and-job-processes), so a restart can tell a started job
    from a queued one. Clears `paused` and `pending_reason`.
    """
    if job_status(job) in FINALIZED:
        raise errors.InvalidParams(f"job {job.id} is finalized; cannot start it")
    if active_op_index(job) is not None:
        raise errors.InvalidParams(f"job {job.id} has an opcode in progress; cannot start it")
    return replace(
        job,
        process_id=pid,
        process_start=pid_start,
        start_ts=job.start_ts if job.start_ts is not None else now,
        paused=False,
        pending_reason=None,
    )


# ------------------------------------------------------------- job process: progress


def mark_opcode_waiting(job: Job, index: int, now: float) -> Job:
    """queued → waiting (waiting for locks or dependencies), or running → waiting (retry)."""
    op = _check_next(job, index, "mark waiting")
    if op.status not in (QUEUED, WAITING, RUNNING):
        raise errors.InvalidParams(f"opcode {index} of job {job.id} is {op.status}")
    new_op = replace(op, status=WAITING, start_ts=op.start_ts if op.start_ts is not None else now)
    return _set_op(job, index, new_op)


def mark_opcode_running(job: Job, index: int, now: float) -> Job:
    """queued/waiting → running: the opcode holds its locks and executes now."""
    op = _check_next(job, index, "start")
    if op.status not in (QUEUED, WAITING):
        raise errors.InvalidParams(f"opcode {index} of job {job.id} is {op.status}")
    new_op = replace(
        op,
        status=RUNNING,
        start_ts=op.start_ts if op.start_ts is not None else now,
        exec_ts=now,
    )
    return _set_op(job, index, new_op)


def requeue_opcode(job: Job, index: int) -> Job:
    """waiting → queued: the job process gave up its lock wait because the job was paused."""
    op = _check_next(job, index, "requeue")
    if op.status not in (QUEUED, WAITING):
        raise errors.InvalidParams(f"opcode {index} of job {job.id} is {op.status}")
    return _set_op(job, index, replace(op, status=QUEUED))


def finish_opcode(job: Job, index: int, now: float, success: bool, result: Any = None) -> Job:
    """The next unfinished opcode ends with success or error.

    An error fails every later unfinished opcode with "Preceding opcode failed" (Ganeti's
    OpExecError) and finalizes the job. A success after a cancel request leaves the later
    opcodes `canceling` for the job process to acknowledge with `mark_canceled`.
    """
    op = _check_next(job, index, "finish")
    new_op = replace(op, status=SUCCESS if success else ERROR, result=result, end_ts=now)
    ops = list(job.ops)
    ops[index] = new_op
    if not success:
        for i in range(index + 1, len(ops)):
            if ops[i].status not in FINALIZED:
                ops[i] = replace(ops[i], status=ERROR, result=MSG_PRECEDING_FAILED, end_ts=now)
    return _finish_bookkeeping(replace(job, ops=tuple(ops)), now)


def add_log(job: Job, index: int, now: float, log_type: str, message: Any) -> Job:
    """Append a log entry to opcode `index` with the job's next serial (global per job).

    Refused on a finalized job: nothing may change a job after its end.
    """
    if job_status(job) in FINALIZED:
        raise errors.InvalidParams(f"job {job.id} is finalized; no more log entries")
    if not 0 <= index < len(job.ops):
        raise errors.InvalidParams(f"job {job.id} has no opcode {index}")
    serial = job.log_serial + 1
    op = job.ops[index]
    new_op = replace(op, log=(*op.log, LogEntry(serial, now, log_type, message)))
    return replace(_set_op(job, index, new_op), log_serial=serial)


# ---------------------------------------------------------- finalizing: cancel / fail


def mark_canceled(job: Job, now: float, message: str = MSG_CANCELED) -> Job:
    """Every unfinished opcode → canceled with `message` as result; the job is finalized.

    Used for queued/waiting cancels, REJECT ("rejected by filter <uuid>"), a canceled
    dependency, and by the job process acknowledging a cancel at a safe point.
    """
    if job_status(job) in FINALIZED:
        return job
    ops = tuple(
        op if op.status in FINALIZED else replace(op, status=CANCELED, result=message, end_ts=now)
        for op in job.ops
    )
    return _finish_bookkeeping(replace(job, ops=ops), now)


def fail_job(job: Job, now: float, message: str, source: str = REASON_SOURCE_LUXID) -> Job:
    """Every unfinished opcode → error with `message`; a reason entry records who and why.

    Finished opcodes keep their status (beyond Ganeti: its failQueuedJob overwrote
    succeeded opcodes with error too). No-op on a finalized job.
    """
    if job_status(job) in FINALIZED:
        return job
    ops = tuple(
        op
        if op.status in FINALIZED
        else replace(
            op,
            input=_with_reason(op, source, message, now),
            status=ERROR,
            result=message,
            end_ts=now,
        )
        for op in job.ops
    )
    return _finish_bookkeeping(replace(job, ops=ops), now)


def process_exited(job: Job, now: float, message: str = MSG_PROCESS_DIED) -> Job:
    """The job's process is gone (exit, crash, or found dead after a luxid restart).

    A finalized job is unchanged. A paused job with no opcode in progress exited as asked:
    it forgets the process and stays queued. Anything else fails with `message`
    ("job process died").
    """
    if job_status(job) in FINALIZED:
        return job
    if job.paused and active_op_index(job) is None:
        return replace(job, process_id=None, process_start=None)
    return fail_job(job, now, message, source=REASON_SOURCE_LUXID + ":deathdetection")


def cancel_job(job: Job, now: float, kill: bool = False) -> Outcome:
    """cancel_job RPC (docs/contracts.md#job-methods): decide the new job and the signal for
    its process.

    - finalized: refused.
    - queued or waiting: canceled at once (SIGTERM to a process still waiting for locks).
    - running, no kill: unfinished opcodes → canceling and SIGTERM; the job process
      cancels at its next safe point (`mark_canceled`).
    - running, kill: error "killed" at once and SIGKILL; wconfd frees the locks when it
      sees the process die.
    """
    status = job_status(job)
    jid = job.id
    if status in FINALIZED:
        return Outcome(job, False, f"Job {jid} is finished")
    if status == CANCELING and not kill:
        return Outcome(job, False, f"Job {jid} is already being canceled")
    if status in (QUEUED, WAITING) or job.process_id is None:
        signal: Signal | None = None
        if job.process_id is not None:
            signal = "KILL" if kill else "TERM"
        return Outcome(mark_canceled(job, now), True, f"Job {jid} canceled", signal)
    if kill:
        return Outcome(
            fail_job(job, now, "killed"), True, f"Job {jid} killed (SIGKILL sent)", "KILL"
        )
    ops = tuple(op if op.status in FINALIZED else replace(op, status=CANCELING) for op in job.ops)
    return Outcome(replace(job, ops=ops), True, f"Job {jid} is being canceled", "TERM")


# ----------------------------------------------------------------- pause / priority


def pause_job(job: Job) -> Job:
    """A PAUSE rule applies to a started job: it stops before its next opcode, then is queued."""
    if job.paused or job_status(job) in FINALIZED:
        return job
    return replace(job, paused=True)


def unpause_job(job: Job) -> Job:
    """No PAUSE rule applies any more to a job whose process has not stopped yet: go on."""
    return replace(job, paused=False) if job.paused else job


def change_priority(job: Job, priority: int) -> Outcome:
    """change_job_priority RPC: queued/waiting opcodes get `priority` (Ganeti's ChangePriority).

    Running and finished opcodes keep theirs. `notify` is set when the job has a process,
    which must learn the new priority for its remaining opcodes and pending lock request.
    """
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise errors.InvalidParams("priority must be an integer")
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise errors.InvalidParams(f"priority must be in {PRIORITY_MIN}..{PRIORITY_MAX}")
    status = job_status(job)
    jid = job.id
    if status in FINALIZED:
        return Outcome(job, False, f"Job {jid} is finished")
    if status == CANCELING:
        return Outcome(job, False, f"Job {jid} is cancelling")
    changed = False
    ops = []
    for op in job.ops:
        if op.status in (QUEUED, WAITING):
            changed = True
            ops.append(replace(op, priority=priority))
        else:
            ops.append(op)
    if not changed:
        return Outcome(job, False, f"Job {jid} had no pending opcodes")
    return Outcome(
        replace(job, ops=tuple(ops)),
        True,
        f"Priorities of pending opcodes for job {jid} have been changed to {priority}",
        notify=job.process_id is not None,
    )


def set_pending_reason(job: Job, reason: str | None) -> Job:
    """The job with this pending reason (unchanged object if it is the same)."""
    return job if job.pending_reason == reason else replace(job, pending_reason=reason)


def set_archived(job: Job, archived: bool = True) -> Job:
    """The job with its archived flag set (only finalized jobs can be archived)."""
    if archived and job_status(job) not in FINALIZED:
        raise errors.InvalidParams(f"job {job.id} is not finalized; cannot archive it")
    return replace(job, archived=archived)
