"""The queue drain (docs/contracts.md#queue-drain): let accepted work finish, hold or refuse
new work.

`drains["queue"]` owns one filter rule, `[["jobid", [">", "id", "watermark"]]]` with
action REJECT (`hard`) or PAUSE (`soft`), reason `[["lw:drain", message, ts]]`.  Jobs
accepted before it (id <= watermark) run as usual; the drain is complete when none of
them is unfinished.  At the deadline they are canceled, and those still running 30 s later
are killed.  `undrain_queue` removes the rule.

The rule's uuid is derived from the drain's start, so putting it again (after a crash, or
to change the mode or message) replaces the same rule instead of adding a second one.
A pass puts the rule while its watermark is not known; the shell applies `PutFilter`
through its own `replace_filter` (which sets the watermark) and reports it with
`filter_set`, passing the ids of the unfinished jobs up to the watermark: those are the
jobs the drain waits for.

Draining the queue again while a drain is in effect changes its mode, deadline and
message, never the jobs it accepted (as a node drain keeps its `started_at`): its
watermark and start stay.  A changed mode or message must still reach the rule (its
action, its reason), but replacing a rule moves the rule's watermark to the newest job
(docs/contracts.md#filters), which would turn the jobs a soft drain holds into accepted ones
and start them.  So the rule is put again with the drain's watermark written into its
predicate, `[["jobid", [">", "id", <watermark>]]]`: the same jobs stay held (or, now hard,
are refused).  Until that put is reported, the record has no `filter_uuid` (the uuid follows
from `started_at`), which is how the next pass knows to put it.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping

import msgspec

from client.errors import InvalidParams
from luxid.drains.effects import QUEUE_PREDICATES, CancelJob, DeleteFilter, Effect, PutFilter
from luxid.drains.node import check_strategy
from luxid.drains.progress import JobFacts, refresh
from luxid.drains.record import (
    DRAIN_KILL_GRACE,
    QUEUE_TARGET,
    DrainJob,
    DrainRecord,
    Mode,
    clock,
    touched,
    with_events,
)

ACTION: dict[Mode, str] = {"hard": "REJECT", "soft": "PAUSE"}
_RULE_NAMESPACE = uuid.UUID("5d0c6f44-8f2b-4c55-9a53-0f1f5e0d7a11")


def rule_uuid(started_at: float) -> str:
    """The uuid of the filter rule of the queue drain started at `started_at`."""
    return str(uuid.uuid5(_RULE_NAMESPACE, repr(started_at)))


def _put_filter(record: DrainRecord, now: float) -> PutFilter:
    """The rule as the record says: the predicates of docs/contracts.md#queue-drain the
    first time, the drain's own watermark in them once it is known (a put again keeps the
    jobs it accepted)."""
    assert record.mode is not None and record.filter_uuid is not None
    predicates = (
        list(QUEUE_PREDICATES)
        if record.watermark is None
        else [["jobid", [">", "id", record.watermark]]]
    )
    return PutFilter(
        target=QUEUE_TARGET,
        uuid=record.filter_uuid,
        action=ACTION[record.mode],
        reason=[["lw:drain", record.message, int(now * 1e9)]],
        predicates=predicates,
    )


def drain_queue(
    existing: DrainRecord | None,
    now: float,
    *,
    mode: str,
    deadline: float | None,
    message: str,
) -> DrainRecord:
    """Start a queue drain, or change the one in effect (mode, deadline, message).

    A change keeps `started_at` and the watermark: the jobs accepted before the drain are
    the same, and the jobs it holds stay held (or, now hard, are refused).  A changed mode
    or message puts the rule again on the next pass (see the module's docstring).
    """
    if mode not in ACTION:
        raise InvalidParams(
            f'param `mode`: must be "hard" (refuse new jobs) or "soft" (hold them), got {mode!r}',
            {"param": "mode"},
        )
    check_strategy(deadline, 1, 0)
    absolute = None if deadline is None else now + deadline
    when = "no deadline" if absolute is None else f"deadline {clock(absolute)}"
    event = f"queue drain set ({mode}, {when})"
    if existing is not None and existing.filter_uuid is not None:
        record = msgspec.structs.replace(
            existing, mode=mode, deadline=absolute, message=message, updated_at=now
        )
        if existing.status != "draining":  # a complete drain whose rule still holds
            record = msgspec.structs.replace(
                record, status="draining", deadline_reached=False, completed_at=None
            )
        if (mode, message) != (existing.mode, existing.message) and existing.watermark is not None:
            record = msgspec.structs.replace(record, filter_uuid=None)  # put it again
        return with_events(record, now, event)
    record = DrainRecord(
        target=QUEUE_TARGET,
        started_at=now,
        updated_at=now,
        deadline=absolute,
        message=message,
        mode=mode,
        filter_uuid=rule_uuid(now),
        events=existing.events if existing else (),
        serial_no=existing.serial_no if existing else 0,
        ctime=existing.ctime if existing else 0.0,
    )
    return with_events(record, now, event)


def filter_set(
    record: DrainRecord, watermark: int, unfinished: Iterable[int], now: float
) -> DrainRecord:
    """The record once its rule is in place with `watermark`; `unfinished` are the ids of
    the jobs not yet finished with id <= watermark (the jobs the drain waits for).

    A rule put again keeps the drain's watermark: the rule's new one, and the jobs up to
    it, change nothing."""
    verb = "refused" if record.mode == "hard" else "held"
    if record.watermark is not None:
        record = msgspec.structs.replace(record, updated_at=now)
        return with_events(
            record,
            now,
            f"filter {record.filter_uuid}: jobs after {record.watermark} are {verb} now",
        )
    known = {job.id for job in record.all_jobs()}
    added = tuple(DrainJob(id=i, kind="job") for i in sorted(set(unfinished) - known))
    record = msgspec.structs.replace(
        record,
        watermark=watermark,
        active=(*record.active, *added),
        total=sum(1 for job in (*record.all_jobs(), *added) if job.id <= watermark),
        updated_at=now,
    )
    return with_events(
        record,
        now,
        f"filter {record.filter_uuid}: jobs after {watermark} are {verb}; "
        f"waiting for {len(added)} jobs",
    )


def step(
    record: DrainRecord,
    jobs: Mapping[int, JobFacts],
    now: float,
    kill_after: float = DRAIN_KILL_GRACE,
) -> tuple[DrainRecord, list[Effect]]:
    """One pass: follow the waited-for jobs, fire the deadline, kill those still running
    `kill_after` s after it, complete."""
    old = record
    record = refresh(record, jobs, now)
    if record.status != "draining":
        return touched(old, record, now), []
    if record.filter_uuid is None:  # a changed mode or message: the rule again
        if record.watermark is None:
            return touched(old, record, now), []
        record = msgspec.structs.replace(record, filter_uuid=rule_uuid(record.started_at))
        return touched(old, record, now), [_put_filter(record, now)]
    if record.watermark is None:
        return touched(old, record, now), [_put_filter(record, now)]
    effects: list[Effect] = []
    waiting = record.active
    if record.deadline is not None and now >= record.deadline and not record.deadline_reached:
        ids = [job.id for job in waiting if job.id not in record.cancel_sent]
        record = msgspec.structs.replace(
            record,
            deadline_reached=True,
            kill_at=now + kill_after,
            cancel_sent=(*record.cancel_sent, *ids),
        )
        effects += [CancelJob(target=QUEUE_TARGET, job_id=i) for i in ids]
        record = with_events(record, now, f"deadline passed: {len(ids)} jobs canceled")
    if record.kill_at is not None and now >= record.kill_at:
        running = [job.id for job in waiting if job.status in ("running", "canceling")]
        record = msgspec.structs.replace(record, kill_at=None)
        effects += [CancelJob(target=QUEUE_TARGET, job_id=i, kill=True) for i in running]
        if running:
            record = with_events(
                record,
                now,
                f"{len(running)} jobs still running {kill_after:g} s after the deadline: killed",
            )
    if not waiting:
        done = "deadline reached" if record.deadline_reached else "all accepted jobs finished"
        record = msgspec.structs.replace(record, status="complete", completed_at=now, kill_at=None)
        record = with_events(record, now, f"{done}; queue drain complete")
    return touched(old, record, now), effects


def undrain_queue(record: DrainRecord, now: float) -> tuple[DrainRecord, list[Effect]]:
    """Remove the rule: held jobs start, new jobs are accepted.  A drain still in progress
    ends `canceled`."""
    effects: list[Effect] = []
    if record.filter_uuid is not None:
        effects.append(DeleteFilter(target=QUEUE_TARGET, uuid=record.filter_uuid))
    status = "canceled" if record.status == "draining" else record.status
    record = msgspec.structs.replace(
        record,
        filter_uuid=None,
        status=status,
        kill_at=None,
        updated_at=now,
        completed_at=record.completed_at if record.completed_at is not None else now,
    )
    return with_events(record, now, "queue undrained"), effects
