"""What luxid does with a job process's report
(docs/contracts.md#job-processes-and-opcodes), as a pure function.

A job process sends events about its job (client.api.luxi: Hello, Check, Waiting, Running,
Log, Priority, Finish); `apply_report` returns the job's new state and the Directive to
answer.  The rules:

- Every event is idempotent: a job process re-sends an event whose answer it lost (a luxid
  restart), so an event that already took effect changes nothing and gets the same answer.
- At a *safe point* (Hello, Check, Waiting, Running, and after Finish) a requested cancel
  completes (`canceling` → `canceled`) and a paused job stops: the opcode waiting for locks
  goes back to `queued`, the process exits, and the job is queued again when it is gone.
- Running is the gate before an opcode executes: it is granted only to a job that is not
  finalized, canceling or paused, and luxid answers it only once it is durable, so a job
  never runs an opcode twice (a restarted luxid sees it running and never starts it again).
"""

from __future__ import annotations

from typing import Any

from msgspec.structs import replace

from client import errors
from client.api.luxi import (
    Check,
    Directive,
    Finish,
    Hello,
    JobEvent,
    Log,
    Priority,
    Running,
    Waiting,
)
from client.vocabulary import PRIORITY_MAX, PRIORITY_MIN
from luxid.jobs.model import (
    CANCELING,
    FINALIZED,
    QUEUED,
    RUNNING,
    WAITING,
    Job,
    job_status,
    next_op_index,
)
from luxid.jobs.transitions import (
    add_log,
    finish_opcode,
    mark_canceled,
    mark_opcode_running,
    mark_opcode_waiting,
    requeue_opcode,
)

STOP = Directive(stop=True)


def directive(job: Job) -> Directive:
    """What the job's process should do now: stop, or work on the next unfinished opcode."""
    if job.paused or job_status(job) in FINALIZED or job_status(job) == CANCELING:
        return STOP
    index = next_op_index(job)
    if index is None:
        return STOP
    return Directive(stop=False, index=index, priority=job.ops[index].priority)


def _safe_point(job: Job, index: int | None, now: float) -> Job:
    """The process does not execute an opcode now: finish a cancel, park a paused job."""
    if job_status(job) == CANCELING:
        return mark_canceled(job, now)
    if job.paused and index is not None and job.ops[index].status == WAITING:
        return requeue_opcode(job, index)
    return job


def _check_index(job: Job, index: int) -> None:
    if not 0 <= index < len(job.ops):
        raise errors.InvalidParams(f"job {job.id} has no opcode {index}")


def set_op_priority(job: Job, index: int, priority: int) -> Job:
    """Opcode `index` (unfinished) now has `priority` (the lock-timeout escalation)."""
    _check_index(job, index)
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise errors.InvalidParams(f"priority must be in {PRIORITY_MIN}..{PRIORITY_MAX}")
    op = job.ops[index]
    if op.status in FINALIZED or op.priority == priority:
        return job
    ops = list(job.ops)
    ops[index] = replace(op, priority=priority)
    return replace(job, ops=tuple(ops))


def _next_is(job: Job, index: int) -> bool:
    return next_op_index(job) == index


def apply_report(job: Job, event: JobEvent, now: float) -> tuple[Job, Directive]:
    """The job after `event` and the answer for its process.

    Raises client.errors.InvalidParams for an event that contradicts the job (an opcode
    index out of range, an opcode that is not the next one), so a confused job process
    cannot corrupt its job.
    """
    if isinstance(event, Hello):
        job = _safe_point(job, None, now)
        answer = directive(job)
        return job, replace(answer, ops=[op.input for op in job.ops])
    _check_index(job, event.index)
    if isinstance(event, Log):
        return _log(job, event, now), directive(job)
    if isinstance(event, Priority):
        return set_op_priority(job, event.index, event.priority), directive(job)
    if isinstance(event, Finish):
        job = _finish(job, event, now)
        job = _safe_point(job, next_op_index(job), now)
        return job, directive(job)
    # Check, Waiting, Running: the process holds no opcode in execution.
    job = _safe_point(job, event.index, now)
    answer = directive(job)
    if answer.stop:
        return job, answer
    if not _next_is(job, event.index):
        raise errors.InvalidParams(
            f"job {job.id}: opcode {event.index} is not the next one ({answer.index})"
        )
    status = job.ops[event.index].status
    if isinstance(event, Waiting) and status == QUEUED:
        job = mark_opcode_waiting(job, event.index, now)
    elif isinstance(event, Running) and status != RUNNING:
        job = mark_opcode_running(job, event.index, now)
    elif not isinstance(event, Check | Waiting | Running):  # pragma: no cover - exhaustive
        raise errors.InvalidParams(f"unknown job event {event!r}")
    return job, answer


def first_directive(job: Job, now: float) -> Directive | None:
    """The answer to the job process's `hello` if it is to run an opcode and asking would
    change nothing (the process may then start without asking: luxid hands it over at
    the spawn); else None.  Never a stop: a job resumed after a pause is still flagged
    paused until its new process is recorded, so its process must ask."""
    new, answer = apply_report(job, Hello(), now)
    return answer if new is job and not answer.stop else None


def _log(job: Job, event: Log, now: float) -> Job:
    """Append the entry unless the job is finalized or the entry is already there."""
    if job_status(job) in FINALIZED or event.seq < len(job.ops[event.index].log):
        return job
    return add_log(job, event.index, now, event.type, event.message)


def _finish(job: Job, event: Finish, now: float) -> Job:
    """Record opcode `index`'s end, once."""
    op = job.ops[event.index]
    if op.status in FINALIZED or job_status(job) in FINALIZED:
        return job
    if event.status == "canceled":
        return mark_canceled(job, now)
    result: Any = event.result
    return finish_opcode(job, event.index, now, event.status == "success", result)
