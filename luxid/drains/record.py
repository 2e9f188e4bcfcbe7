"""The drain record's luxid side (docs/contracts.md#drains): the record type itself is
declared once in `client.drains` (wconfd stores it as its `drain` kind); here are luxid's
words and times for it and the pure functions that change it.  Everything is plain data; the
functions return new records.
"""

from __future__ import annotations

from datetime import datetime
from typing import Final

import msgspec

from client.drains import (
    EVENTS_KEPT,
    FINALIZED,
    NODE_PREFIX,
    QUEUE_TARGET,
    Blocked,
    DrainJob,
    DrainRecord,
    Event,
    JobKind,
    Mode,
    Status,
)
from client.errors import InvalidParams
from client.vocabulary import PRIORITY_MIN

__all__ = [
    "BUDGET_KEY",
    "DRAIN_KILL_GRACE",
    "EVENTS_KEPT",
    "FINALIZED",
    "JOB_NOUN",
    "MOST_URGENT",
    "QUEUE_TARGET",
    "Blocked",
    "DrainJob",
    "DrainRecord",
    "Event",
    "JobKind",
    "Mode",
    "Status",
    "budget_blocked",
    "check_target",
    "clock",
    "events_since",
    "held_budget",
    "may_act",
    "node_target",
    "touched",
    "with_events",
]

# The first job of a node drain (and the undrain job of a cancel) runs at this priority.
MOST_URGENT: Final = PRIORITY_MIN
# A drain's kill grace: a queue drain's canceled jobs still running this long after its
# deadline are killed (luxid's --drain-kill-after changes it).  Not to be confused with
# luxid.term.STOP_GRACE, the grace of the job processes of a master that lost its role.
DRAIN_KILL_GRACE: Final = 30.0
# How events name a drain's jobs: `web3: migration job 41 submitted`.
JOB_NOUN: Final[dict[JobKind, str]] = {
    "drained": "drain-marking",
    "undrained": "undrain-marking",
    "migrate": "migration",
    "failover": "failover",
    "shutdown": "shutdown",
    "job": "queued",
}


# The key of a `Blocked` that a disruption budget holds: `budget:<name>`.  Its stored reason
# is only `budget <name>`: the count changes with every job, so a status shows the budget's
# reason as it is then (luxid.drains.status), and the record is not rewritten for it.
BUDGET_KEY: Final = "budget:"


def budget_blocked(name: str) -> Blocked:
    """An instance whose move budget `name` holds now."""
    return Blocked(reason=f"budget {name}", key=BUDGET_KEY + name)


def held_budget(blocked: Blocked) -> str | None:
    """The budget that holds the instance, or None (no room, or a refused submit)."""
    key = blocked.key
    return key[len(BUDGET_KEY) :] if key is not None and key.startswith(BUDGET_KEY) else None


def node_target(node: str) -> str:
    """The drain key of a node: `node/<name>`."""
    return NODE_PREFIX + node


def clock(when: float) -> str:
    """A time of day for events: `12:00:00` (local time, as the CLI shows times)."""
    return datetime.fromtimestamp(when).strftime("%H:%M:%S")


def with_events(record: DrainRecord, now: float, *messages: str) -> DrainRecord:
    """The record with `messages` appended as events (serials go on), the last 1,000 kept."""
    if not messages:
        return record
    serial = record.last_event
    added = tuple((serial + i, now, text) for i, text in enumerate(messages, start=1))
    return msgspec.structs.replace(record, events=(record.events + added)[-EVENTS_KEPT:])


def events_since(record: DrainRecord, since: int) -> list[Event]:
    """The events with a serial greater than `since`."""
    return [event for event in record.events if event[0] > since]


def touched(old: DrainRecord, new: DrainRecord, now: float) -> DrainRecord:
    """`new`, with `updated_at` = now if anything changed since `old`."""
    return new if new == old else msgspec.structs.replace(new, updated_at=now)


def check_target(target: str) -> None:
    """InvalidParams unless `target` is `queue` or `node/<name>`."""
    if target != QUEUE_TARGET and not (target.startswith(NODE_PREFIX) and len(target) > 5):
        raise InvalidParams(
            f'param `target`: must be "queue" or "node/<name>", got {target!r}',
            {"param": "target"},
        )


def may_act(record: DrainRecord) -> bool:
    """Whether a pass could do anything for the drain, so that a configuration change
    should run one (a scheduled drain waits for its timer; an ended one may still have
    to undrain its node)."""
    if record.status == "draining" or record.active:
        return True
    return record.undrain and not any(job.kind == "undrained" for job in record.all_jobs())
