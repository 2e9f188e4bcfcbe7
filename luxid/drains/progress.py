"""Following a drain's jobs: their new statuses become record changes and events.

The shell hands the core a `JobFacts` for every job id the drain records (status as in
docs/contracts.md#job-model, and the error text of a failed or canceled job).  Each change
of status is turned into the event Nomad's users would expect (`web3: migrating to node2`,
`web3: migrated to node2`, `web3: blocked: no node has room …`) and into the record's state:
a finished job moves from `active` to `done`, a successful move adds its instance to
`moved`, a failed one marks it blocked, a finished shutdown adds it to `shut_down`.  Only
the unfinished jobs are looked at, so a pass costs what is under way, not the drain's
history.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from luxid.drains.record import (
    FINALIZED,
    JOB_NOUN,
    Blocked,
    DrainJob,
    DrainRecord,
    JobKind,
    with_events,
)
from luxid.jobs import Job, job_status

_GOING: dict[JobKind, str] = {"migrate": "migrating", "failover": "failing over"}
_DONE: dict[JobKind, str] = {
    "migrate": "migrated",
    "failover": "failed over",
    "shutdown": "shut down (no node can take it)",
    "drained": "marked drained",
    "undrained": "marked not drained",
}


class JobFacts(msgspec.Struct, frozen=True, kw_only=True):
    """A job as luxid knows it: its status and, if it failed or was canceled, why."""

    status: str
    error: str | None = None


def job_facts(job: Job) -> JobFacts:
    """A job's status and, for a failed or canceled one, the result of the opcode that
    ended it (the error message jobproc reported)."""
    status = job_status(job)
    error = None
    if status in ("error", "canceled"):
        for op in job.ops:
            if op.status == status and op.result is not None:
                error = op.result if isinstance(op.result, str) else str(op.result)
                break
    return JobFacts(status=status, error=error)


def _why(facts: JobFacts) -> str:
    return facts.error or f"job {facts.status}"


def _transition(
    record: DrainRecord, job: DrainJob, facts: JobFacts, blocked: dict[str, Blocked]
) -> str | None:
    """The event for `job` reaching `facts.status`; updates `blocked` for failed moves."""
    status, kind = facts.status, job.kind
    who = job.instance or record.node
    if kind == "job":
        return f"job {job.id}: {status}" if status in FINALIZED else None
    if status == "canceled" and job.id in record.cancel_sent:
        return f"{who}: {JOB_NOUN[kind]} job {job.id} canceled"
    if status == "running" and kind in _GOING:
        return f"{who}: {_GOING[kind]} to {job.node or 'another node'}"
    if status == "success":
        return f"{who}: {_DONE[kind]}" + (f" to {job.node}" if job.node else "")
    if status not in FINALIZED:
        return None
    if kind == "migrate" and job.instance is not None:
        # Not retried until the room on the cluster changes (the key is filled in by the
        # pass that sees this, from the view it plans with).
        blocked[job.instance] = Blocked(reason=_why(facts))
        return f"{who}: blocked: {_why(facts)}"
    return f"{who}: {JOB_NOUN[kind]} job {job.id} {status}: {_why(facts)}"


def refresh(record: DrainRecord, jobs: Mapping[int, JobFacts], now: float) -> DrainRecord:
    """The record with its jobs' statuses taken from `jobs`, and an event per change.

    Jobs `jobs` does not mention keep their last known status.
    """
    changes = [
        (job, facts)
        for job in record.active
        if (facts := jobs.get(job.id)) is not None and facts.status != job.status
    ]
    if not changes:
        return record
    events: list[str] = []
    blocked = dict(record.blocked)
    shut_down = list(record.shut_down)
    moved = list(record.moved)
    seen: dict[int, DrainJob] = {}
    for job, facts in changes:
        event = _transition(record, job, facts, blocked)
        if event is not None:
            events.append(event)
        if facts.status == "success" and job.instance:
            if job.kind == "shutdown":
                shut_down.append(job.instance)
            elif job.kind in ("migrate", "failover"):
                moved.append(job.instance)
        seen[job.id] = msgspec.structs.replace(job, status=facts.status)
    now_jobs = [seen.get(job.id, job) for job in record.active]
    updated = msgspec.structs.replace(
        record,
        active=tuple(job for job in now_jobs if job.unfinished),
        done=record.done + tuple(job for job in now_jobs if not job.unfinished),
        moved=tuple(moved),
        blocked=blocked,
        shut_down=tuple(shut_down),
    )
    return with_events(updated, now, *events)
