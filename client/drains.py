"""The drain record (docs/contracts.md#drains): what wconfd stores under `drains[target]`,
declared once for both daemons and for clients reading `get_object("drain", target)`.

wconfd stores and checks it as the `drain` kind of its configuration (wconfd.config.objects
names it `Drain`); luxid's drain core (luxid.drains) reads, changes and writes it.  It
carries the fields docs/contracts.md#node-drain names (target, status, started_at,
updated_at, start_at, deadline, max_parallel, priority, message, deadline_reached, completed_at,
events; uuid, serial_no, ctime and mtime as every config object; a drain's uuid is its
target) plus the state a restarted luxid needs to resume without moving an instance twice:
the drain's jobs with their last seen status (the unfinished ones apart, so that a pass
looks at those only), the instances it moved, the blocked instances with the capacity key
they were refused under, the instances shut down at the deadline, the cancels already sent,
and for the queue drain its mode, filter rule and watermark.

Unknown fields are refused (as for every config object), and every field has the type
luxid writes, so a malformed record is refused when written, not when luxid resumes.
The wire shape is the one both daemons wrote before this declaration was shared, so a
state directory written then still loads.
"""

from __future__ import annotations

from typing import Final, Literal, TypeAlias

import msgspec

from client.vocabulary import FINALIZED_STATUSES

QUEUE_TARGET: Final = "queue"
NODE_PREFIX: Final = "node/"
EVENTS_KEPT: Final = 1000  # the record keeps the last 1,000 events (docs/contracts.md#node-drain)
FINALIZED: Final = frozenset(FINALIZED_STATUSES)
# The latest start time of a scheduled drain (seconds since the epoch):
# 9999-12-31T00:00:00Z, the last day a date can show in any time zone.
START_AT_MAX: Final = 253_402_214_400.0

# scheduled: waiting for its start_at (docs/contracts.md#scheduled-drains); nothing marked or moved.
Status: TypeAlias = Literal["scheduled", "draining", "complete", "canceled"]
Mode: TypeAlias = Literal["hard", "soft"]
# drained/undrained: OP_NODE_SET_PARAMS; migrate/failover/shutdown: a move of `instance`;
# job: a job accepted before a queue drain (id <= watermark) that the drain waits for.
JobKind: TypeAlias = Literal["drained", "undrained", "migrate", "failover", "shutdown", "job"]
# [serial, timestamp, message]
Event: TypeAlias = tuple[int, float, str]


class _Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Immutable, strict about unknown fields, keyword-only (as wconfd's objects)."""


class DrainJob(_Record, frozen=True, kw_only=True):
    """A job of the drain: what it does and its status when the drain last looked."""

    id: int
    kind: JobKind
    instance: str | None = None
    node: str | None = None  # the target node of a move
    status: str = "queued"

    @property
    def unfinished(self) -> bool:
        return self.status not in FINALIZED


class Blocked(_Record, frozen=True, kw_only=True):
    """Why an instance cannot move now, the capacity key it was refused under, and whether
    that was a failover at the deadline (or a migration before it)."""

    reason: str
    key: str | None = None
    at_deadline: bool = False


class DrainRecord(_Record, frozen=True, kw_only=True):
    """One drain: `drains["node/<name>"]` or `drains["queue"]`."""

    uuid: str = ""  # = target (wconfd fills it in), so the map kinds share one index
    target: str
    status: Status = "draining"
    started_at: float = 0.0
    updated_at: float = 0.0
    deadline: float | None = None
    max_parallel: int = 1
    priority: int = 0
    message: str = ""
    deadline_reached: bool = False
    completed_at: float | None = None
    events: tuple[Event, ...] = ()
    # When a scheduled drain starts (absolute); null for one started when called.  A
    # record from before scheduled drains has none, so it loads as null.
    start_at: float | None = None
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
