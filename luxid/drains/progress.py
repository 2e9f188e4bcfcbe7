"""Following a drain's jobs: their new statuses become record changes and events.

The shell hands the core a `JobFacts` for every job id the drain records (status as in
§6.1, and the error text of a failed or canceled job).  Each change of status is turned
into the event Nomad's users would expect (`web3: migrating to node2`, `web3: migrated to
node2`, `web3: blocked: no node has room …`) and into the record's state: a finished job
moves from `active` to `done`, a successful move adds its instance to `moved`, a failed
one marks it blocked, a finished shutdown adds it to `shut_down`.  Only the unfinished
jobs are looked at, so a pass costs what is under way, not the drain's history.
"""

from __future__ import annotations

from collections.abc import Mapping

import msgspec

from luxid.drains.record import Blocked, DrainJob, DrainRecord, with_events


class JobFacts(msgspec.Struct, frozen=True, kw_only=True):
    """A job as luxid knows it: its status and, if it failed or was canceled, why."""

    status: str
    error: str | None = None


def _why(facts: JobFacts) -> str:
    return facts.error or f"job {facts.status}"


def _transition(
    record: DrainRecord, job: DrainJob, facts: JobFacts, blocked: dict[str, Blocked]
) -> str | None:
    """The event for `job` reaching `facts.status`; updates `blocked` for failed moves."""
    status, inst, node = facts.status, job.instance, job.node
    if job.kind == "job":
        return f"job {job.id}: {status}" if status in ("success", "error", "canceled") else None
    if job.kind in ("drained", "undrained"):
        flag = "drained" if job.kind == "drained" else "not drained"
        if status == "success":
            return f"{record.node}: marked {flag}"
        if status in ("error", "canceled"):
            return f"{record.node}: could not be marked {flag} (job {job.id}): {_why(facts)}"
        return None
    verb = {"migrate": ("migrating", "migrated"), "failover": ("failing over", "failed over")}
    if job.kind in verb:
        going, gone = verb[job.kind]
        if status == "running":
            return f"{inst}: {going} to {job.node or 'another node'}"
        if status == "success":
            return f"{inst}: {gone} to {node or 'another node'}"
        if status == "canceled" and job.id in record.cancel_sent:
            return f"{inst}: {job.kind} job {job.id} canceled"
        if status in ("error", "canceled") and inst is not None:
            # Not retried until the room on the cluster changes (the key is filled in by
            # the pass that sees this, from the view it plans with).
            blocked[inst] = Blocked(reason=_why(facts))
            return f"{inst}: blocked: {_why(facts)}"
        return None
    # shutdown
    if status == "success":
        return f"{inst}: shut down (no node can take it)"
    if status in ("error", "canceled"):
        return f"{inst}: shutdown failed (job {job.id}): {_why(facts)}"
    return None


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
