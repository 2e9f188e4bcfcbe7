"""The drain record (SPEC §12.1, §12.2): what wconfd stores under `drains[target]`.

A record carries the fields §12.1 names (target, status, started_at, updated_at, deadline,
max_parallel, priority, message, deadline_reached, completed_at, events; serial_no, ctime
and mtime as every config object) plus the state a restarted luxid needs to resume without
moving an instance twice: the drain's jobs with their last seen status (the unfinished
ones apart, so that a pass looks at those only), the instances it moved, the blocked
instances with the capacity key they were refused under, the instances shut down at the
deadline, the cancels already sent, and for the queue drain its mode, filter rule and
watermark.  Everything here is plain data; the functions return new records.
"""

from __future__ import annotations

import time
from typing import Final, Literal, TypeAlias

import msgspec

QUEUE_TARGET: Final = "queue"
NODE_PREFIX: Final = "node/"
EVENTS_KEPT: Final = 1000
# The first job of a node drain (and the undrain job of a cancel) runs at this priority.
MOST_URGENT: Final = -20
# A queue drain's canceled jobs still running this long after the deadline are killed.
KILL_AFTER: Final = 30.0
FINALIZED: Final = frozenset({"success", "error", "canceled"})

Status: TypeAlias = Literal["draining", "complete", "canceled"]
Mode: TypeAlias = Literal["hard", "soft"]
# drained/undrained: OP_NODE_SET_PARAMS; migrate/failover/shutdown: a move of `instance`;
# job: a job accepted before a queue drain (id <= watermark) that the drain waits for.
JobKind: TypeAlias = Literal["drained", "undrained", "migrate", "failover", "shutdown", "job"]
# How events name a drain's jobs: `web3: migration job 41 submitted`.
JOB_NOUN: Final[dict[JobKind, str]] = {
    "drained": "drain-marking",
    "undrained": "undrain-marking",
    "migrate": "migration",
    "failover": "failover",
    "shutdown": "shutdown",
    "job": "queued",
}
# [serial, timestamp, message]
Event: TypeAlias = tuple[int, float, str]


class DrainJob(msgspec.Struct, frozen=True, kw_only=True):
    """A job of the drain: what it does and its status when the drain last looked."""

    id: int
    kind: JobKind
    instance: str | None = None
    node: str | None = None  # the target node of a move
    status: str = "queued"

    @property
    def unfinished(self) -> bool:
        return self.status not in FINALIZED


class Blocked(msgspec.Struct, frozen=True, kw_only=True):
    """Why an instance cannot move now, the capacity key it was refused under, and whether
    that was a failover at the deadline (or a migration before it)."""

    reason: str
    key: str | None = None
    at_deadline: bool = False


class DrainRecord(msgspec.Struct, frozen=True, kw_only=True):
    """One drain: `drains["node/<name>"]` or `drains["queue"]`."""

    target: str
    status: Status = "draining"
    started_at: float
    updated_at: float
    deadline: float | None = None
    max_parallel: int = 1
    priority: int = 0
    message: str = ""
    deadline_reached: bool = False
    completed_at: float | None = None
    events: tuple[Event, ...] = ()
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0
    # -- what resuming needs ---------------------------------------------------------
    mode: Mode | None = None  # queue drains only
    active: tuple[DrainJob, ...] = ()  # the unfinished jobs, as last seen
    done: tuple[DrainJob, ...] = ()  # the finished ones
    moved: tuple[str, ...] = ()  # the instances a migration or failover of it moved
    blocked: dict[str, Blocked] = {}
    shut_down: tuple[str, ...] = ()
    cancel_sent: tuple[int, ...] = ()
    undrain: bool = False  # canceled without keep_drained: set drained back to false
    filter_uuid: str | None = None  # queue drains: the rule that holds or refuses new jobs
    watermark: int | None = None
    total: int = 0  # queue drains: the jobs it waited for when it started
    kill_at: float | None = None  # queue drains: when canceled jobs still running are killed

    @property
    def is_node(self) -> bool:
        return self.target.startswith(NODE_PREFIX)

    @property
    def node(self) -> str:
        """The node's name (node drains only)."""
        return self.target[len(NODE_PREFIX) :]

    @property
    def last_event(self) -> int:
        return self.events[-1][0] if self.events else 0

    def all_jobs(self) -> tuple[DrainJob, ...]:
        """Every job of the drain, finished or not."""
        return self.done + self.active


def node_target(node: str) -> str:
    """The drain key of a node: `node/<name>`."""
    return NODE_PREFIX + node


def clock(when: float) -> str:
    """A time of day for events: `12:00:00` (local time, as the CLI shows times)."""
    return time.strftime("%H:%M:%S", time.localtime(when))


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
