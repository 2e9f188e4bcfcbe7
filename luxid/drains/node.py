"""Node drains (docs/contracts.md#node-drain): start, update, cancel, and the bookkeeping of
submitted jobs.

These functions change a record in answer to an operator (`drain_node`,
`cancel_node_drain`) or to the shell reporting what it did (`record_submitted`,
`adopt_jobs`).  What to submit or cancel next is decided by `luxid.drains.moves.step`,
which the shell runs after each of them.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from client.durations import MAX_SECONDS
from client.errors import InvalidParams, NotFound
from client.vocabulary import PRIORITY_MAX, PRIORITY_MIN
from luxid.drains.effects import TAG_SOURCE, ChangePriority, Effect, Submit
from luxid.drains.record import (
    JOB_NOUN,
    MOST_URGENT,
    Blocked,
    DrainJob,
    DrainRecord,
    JobKind,
    clock,
    node_target,
    with_events,
)
from luxid.drains.schedule import (
    begins,
    cancel_scheduled,
    check_start_at,
    past_event,
    scheduled_event,
)
from luxid.drains.view import ClusterView
from luxid.jobs import Job

MOVES: frozenset[JobKind] = frozenset({"migrate", "failover"})
_OP_OF: dict[JobKind, str] = {
    "drained": "OP_NODE_SET_PARAMS",
    "undrained": "OP_NODE_SET_PARAMS",
    "migrate": "OP_INSTANCE_MIGRATE",
    "failover": "OP_INSTANCE_FAILOVER",
    "shutdown": "OP_INSTANCE_SHUTDOWN",
}


def check_strategy(deadline: float | None, max_parallel: int, priority: int) -> None:
    """InvalidParams naming the parameter that is out of range
    (docs/contracts.md#drain-methods)."""
    # At most a century (client.durations): further is a typo, and no clock can show it.
    if deadline is not None and not (math.isfinite(deadline) and 0 <= deadline <= MAX_SECONDS):
        raise InvalidParams(
            f"param `deadline`: must be 0 (now) to {MAX_SECONDS} seconds from now, or null "
            "for none",
            {"param": "deadline"},
        )
    if max_parallel < 1:
        raise InvalidParams(
            f"param `max_parallel`: must be >= 1 (moves at once), got {max_parallel}",
            {"param": "max_parallel"},
        )
    if not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise InvalidParams(
            f"param `priority`: must be in {PRIORITY_MIN}..{PRIORITY_MAX} (lower is more urgent),"
            f" got {priority}",
            {"param": "priority"},
        )


def strategy_event(deadline: float | None, max_parallel: int) -> str:
    """`drain strategy set (deadline 12:00:00, max_parallel 2)`."""
    when = "no deadline" if deadline is None else f"deadline {clock(deadline)}"
    return f"drain strategy set ({when}, max_parallel {max_parallel})"


def drain_node(
    existing: DrainRecord | None,
    node: str,
    view: ClusterView,
    now: float,
    *,
    deadline: float | None,
    max_parallel: int,
    priority: int,
    message: str,
    start_at: float | None = None,
) -> tuple[DrainRecord, list[Effect]]:
    """Start draining `node` (at `start_at`, if that is ahead: a scheduled drain), or
    change the strategy of its drain in progress.

    `deadline` is in seconds from the later of `now` and `start_at` (None: none; 0: at
    the start).  A drain in progress keeps its `started_at`; its unfinished moves get the
    new priority; a start time ahead is refused for it (it has started).  A scheduled,
    finished or canceled drain is replaced by a new one (its events go on, so followers
    miss nothing).
    """
    if node not in view.nodes:
        raise NotFound(f"no node named {node!r} (see `lw node list`)")
    check_strategy(deadline, max_parallel, priority)
    check_start_at(start_at)
    begin, later = begins(start_at, now)
    absolute = None if deadline is None else begin + deadline
    strategy: dict[str, Any] = {
        "deadline": absolute,
        "max_parallel": max_parallel,
        "priority": priority,
        "message": message,
    }
    effects: list[Effect] = []
    events: list[str] = []
    if existing is not None and existing.status == "draining":
        if later:
            raise InvalidParams(
                f"param `start_at`: {node} is already draining, so it cannot start later; "
                f"cancel it first (`lw node drain {node} --disable`), or leave start_at out "
                "to change the drain in progress",
                {"param": "start_at"},
            )
        record = msgspec.structs.replace(existing, updated_at=now, **strategy)
        if priority != existing.priority:
            effects = [
                ChangePriority(target=existing.target, job_id=job.id, priority=priority)
                for job in existing.active
                if job.kind in MOVES and job.status in ("queued", "waiting")
            ]
    else:
        record = DrainRecord(
            target=node_target(node),
            status="scheduled" if later else "draining",
            started_at=begin,
            updated_at=now,
            start_at=start_at,
            events=existing.events if existing else (),
            serial_no=existing.serial_no if existing else 0,
            ctime=existing.ctime if existing else 0.0,
            **strategy,
        )
        if start_at is not None:
            events.append(scheduled_event(start_at) if later else past_event(start_at))
    events.append(strategy_event(absolute, max_parallel))
    return with_events(record, now, *events), effects


def cancel_node_drain(record: DrainRecord, now: float, *, keep_drained: bool) -> DrainRecord:
    """Cancel a drain in progress (`status: "canceled"`); unless `keep_drained`, the node's
    `drained` flag goes back to false.  On a finished drain only the flag is affected.

    The cancels and the OP_NODE_SET_PARAMS job themselves come from the next step.  A
    scheduled drain never started: it is canceled with no job at all.
    """
    if record.status == "scheduled":
        return cancel_scheduled(record, now)
    undrain = record.undrain or not keep_drained
    if record.status == "draining":
        record = msgspec.structs.replace(record, status="canceled", completed_at=now)
        record = with_events(record, now, "drain canceled")
    elif undrain and not record.undrain:
        record = with_events(record, now, f"drain disabled: {record.node} will be undrained")
    return msgspec.structs.replace(record, undrain=undrain)


def job_tag(target: str, kind: JobKind, instance: str | None, node: str | None) -> str:
    """The tag a drain job carries in its reason trail: `node/n1 migrate web3 node2`."""
    return f"{target} {kind} {instance or '-'} {node or '-'}"


def submit(
    record: DrainRecord,
    kind: JobKind,
    now: float,
    *,
    instance: str | None = None,
    node: str | None = None,
) -> Submit:
    """The Submit effect for one job of a node drain.

    Moves carry the reason `["lw:drain", "rate-limit:<max_parallel>:drain-<node>", ts]`
    and the drain's priority, except failovers and shutdowns at the deadline, which
    ignore max_parallel.  The OP_NODE_SET_PARAMS jobs run at the most urgent priority.
    """
    ts = int(now * 1e9)
    tag = job_tag(record.target, kind, instance, node)
    op: dict[str, Any] = {"OP_ID": _OP_OF[kind]}
    if kind in ("drained", "undrained"):
        op.update(node_name=record.node, drained=kind == "drained", priority=MOST_URGENT)
        why = f"drain-{record.node}"
    else:
        op.update(instance_name=instance, priority=record.priority)
        if node is not None:
            op["target_node"] = node
        why = (
            f"rate-limit:{record.max_parallel}:drain-{record.node}"
            if kind == "migrate"
            else f"deadline:drain-{record.node}"
        )
    op["reason"] = [["lw:drain", why, ts], [TAG_SOURCE, tag, ts]]
    return Submit(target=record.target, tag=tag, kind=kind, instance=instance, node=node, ops=[op])


def _submitted_event(job: DrainJob, node: str) -> str:
    if job.kind == "drained":
        return f"job {job.id} submitted: mark {node} drained"
    if job.kind == "undrained":
        return f"job {job.id} submitted: mark {node} not drained"
    return f"{job.instance}: {JOB_NOUN[job.kind]} job {job.id} submitted"


def record_submitted(record: DrainRecord, effect: Submit, job_id: int, now: float) -> DrainRecord:
    """The record once the shell submitted `effect` as job `job_id`."""
    job = DrainJob(id=job_id, kind=effect.kind, instance=effect.instance, node=effect.node)
    record = msgspec.structs.replace(record, active=(*record.active, job), updated_at=now)
    return with_events(record, now, _submitted_event(job, record.node))


def submit_refused(record: DrainRecord, effect: Submit, message: str, now: float) -> DrainRecord:
    """The record once luxid could not submit `effect` (`message` says why): a move's
    instance is blocked until the room on the cluster changes (never retried in a loop);
    the event says what was refused."""
    who = effect.instance or record.node
    if effect.instance is not None and effect.kind == "migrate":
        blocked = {**record.blocked, effect.instance: Blocked(reason=message)}
        record = msgspec.structs.replace(record, blocked=blocked)
    return with_events(record, now, f"{who}: {JOB_NOUN[effect.kind]} job refused: {message}")


def tagged_jobs(jobs: Iterable[Job]) -> dict[int, str]:
    """The live jobs that carry a drain's `lw:drain-job` reason, with its text (what
    `adopt_jobs` looks for after a restart)."""
    out: dict[int, str] = {}
    for job in jobs:
        for op in job.ops:
            for entry in op.input.get("reason") or ():
                if isinstance(entry, list | tuple) and entry and entry[0] == TAG_SOURCE:
                    out[job.id] = str(entry[1])
    return out


def adopt_jobs(record: DrainRecord, tagged: Mapping[int, str], now: float) -> DrainRecord:
    """After a restart: add the jobs whose reason tag names this drain but which the record
    does not know (luxid died between submitting them and writing the record).

    `tagged` maps job ids to the text of their `lw:drain-job` reason entry.
    """
    known = {job.id for job in record.all_jobs()}
    found: list[DrainJob] = []
    for job_id, tag in sorted(tagged.items()):
        parts = tag.split(" ")
        if len(parts) != 4 or parts[0] != record.target or job_id in known:
            continue
        _, kind, instance, node = parts
        if kind not in _OP_OF:
            continue
        found.append(
            DrainJob(
                id=job_id,
                kind=kind,
                instance=None if instance == "-" else instance,
                node=None if node == "-" else node,
            )
        )
    if not found:
        return record
    record = msgspec.structs.replace(record, active=(*record.active, *found), updated_at=now)
    return with_events(record, now, *(f"job {job.id} found again after a restart" for job in found))
