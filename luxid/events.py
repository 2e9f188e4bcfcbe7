"""luxid's events (docs/contracts.md#events): which change becomes which event.  Pure: the
shell passes the change and the time, and the job store numbers the events in the same
transaction as the change (luxid.storage).

- a job's status or pending_reason changed (the first at submit): `job/<id>`, `status`;
- a drain's event line (docs/contracts.md#drains): the drain's target, `event`;
- a filter rule added, replaced or removed: `filter/<uuid>`, `add`/`update`/`remove`;
- a disruption budget added, replaced or removed: `budget/<name>`, `add`/`update`/`remove`;
  a job started past it: `budget/<name>`, `event` (its line in `data.message`);
- the queue's drain flag set or cleared: `queue`, `drain_flag`;
- this node's luxid became the master: `node/<name>`, `master`.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

from client.api.common import Event
from client.events import new_event
from luxid.jobs.model import FINALIZED, Job, job_status

DAEMON: Final = "luxid"


def _opcode(job: Job) -> str | None:
    """The OP_ID of the opcode the job is at: the first unfinished one, else the last."""
    for op in job.ops:
        if op.status not in FINALIZED:
            return op.op_id
    return job.ops[-1].op_id if job.ops else None


def job_event(old: Job | None, new: Job, ts: float) -> Event | None:
    """The event of one job change, or None when neither its status nor its
    pending_reason changed (`old` None: the job was just submitted)."""
    status = job_status(new)
    if old is not None and old.pending_reason == new.pending_reason and job_status(old) == status:
        return None
    data: dict[str, Any] = {
        "status": status,
        "opcode": _opcode(new),
        "pending_reason": new.pending_reason,
    }
    return new_event(DAEMON, "job", "status", f"job/{new.id}", data, ts)


def job_events(changes: Iterable[tuple[Job | None, Job]], ts: float) -> list[Event]:
    """The events of several job changes, in order."""
    out = []
    for old, new in changes:
        event = job_event(old, new, ts)
        if event is not None:
            out.append(event)
    return out


def drain_event(target: str, line: str, ts: float) -> Event:
    """A drain's event line (`target` "node/<name>" or "queue")."""
    return new_event(DAEMON, "drain", "event", target, {"message": line}, ts)


def filter_event(action: str, uuid: str, rule: dict[str, Any] | None, ts: float) -> Event:
    """A filter rule added, updated or removed (`rule`: its fields, None when removed)."""
    data: dict[str, Any] = {"uuid": uuid} if rule is None else dict(rule)
    return new_event(DAEMON, "filter", action, f"filter/{uuid}", data, ts)


def budget_event(action: str, name: str, data: dict[str, Any], ts: float) -> Event:
    """A budget added, updated or removed (`data`: its record, or its name when removed),
    or a start past it (`event`, `data.message`)."""
    return new_event(DAEMON, "budget", action, f"budget/{name}", data, ts)


def drain_flag_event(flag: bool, ts: float) -> Event:
    """The queue's drain flag set or cleared."""
    return new_event(DAEMON, "queue", "drain_flag", "queue", {"drained": flag}, ts)


def master_event(node: str, term: int, ts: float) -> Event:
    """This node's luxid serves as the master (of `term`: 0 on local files)."""
    return new_event(DAEMON, "role", "master", f"node/{node}", {"node": node, "term": term}, ts)
