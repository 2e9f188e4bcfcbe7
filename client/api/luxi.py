"""The luxid API: declared once, served by luxid, called by the stubs.

Besides the job-queue methods (docs/contracts.md#job-methods) it declares `job_report`, the
channel a job process (jobproc) uses to tell luxid what it does and to learn what it should
do next.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from client.api import declare, numbers
from client.api.common import AuditActor, DaemonApi
from client.api.declare import rpc, target
from client.api.numbers import Count, JobId, Seconds
from client.api.opcodes import check_opcodes
from client.api.why import WhyJob
from client.drains import Status as DrainStatusName
from client.errors import (
    FilterError,
    InvalidOpcode,
    InvalidParams,
    NotFound,
    PermissionDenied,
    QueueDrained,
    StorageError,
    Timeout,
)
from client.vocabulary import FinalizedStatus

# An opcode: {"OP_ID": "OP_…", <params>…, priority?, depends?, reason?, comment?}.
Opcode = dict[str, Any]
# A job's opcodes, their common params checked at the edge (InvalidOpcode names them).
Job = Annotated[list[Opcode], declare.Check(check_opcodes)]
# Arrays in results, of a fixed length.  Declared as Sequence: a stub decodes every JSON
# array as a list, while the daemon may build them from tuples.
LogEntry = Annotated[Sequence[Any], Meta(min_length=4, max_length=4)]
"""[serial, timestamp, type, message]"""
Verdict = Annotated[list[bool | str], Meta(min_length=2, max_length=2)]
"""[done, message] of cancel_job and change_job_priority."""
SubmitOutcome = Annotated[list[bool | int | str], Meta(min_length=2, max_length=2)]
"""[true, job_id] or [false, message] per job of submit_many_jobs."""


class JobChange(msgspec.Struct, frozen=True):
    """What wait_for_job_change answers when something changed."""

    values: list[Any]
    log: Sequence[LogEntry]


class QueueInfo(msgspec.Struct, frozen=True):
    """The queue at a glance: drain flag, slots, jobs per status, number of filters, and
    the queue drain (docs/contracts.md#queue-drain) if there is one (the flag and the drain
    are separate)."""

    drained: bool
    max_running_jobs: int
    running: int
    counts: dict[str, int]
    filters: int
    queue_drain: DrainStatus | None = None


class QueueOverview(msgspec.Struct, frozen=True):
    """The jobs a queue overview shows (query_queue_overview): the first queued ones by id,
    every active one, the latest finished ones (newest first), how many are queued, and
    `[pending_reason, count]` pairs over all queued jobs (most common first)."""

    queued: list[int]
    queued_total: int
    active: list[int]
    recent: list[int]
    pending_reasons: list[Annotated[Sequence[Any], Meta(min_length=2, max_length=2)]]


# -- the job-process protocol (docs/contracts.md#job-processes-and-opcodes) ----------------
#
# A job process sends events about its own job; luxid answers each with a Directive.  All
# events are idempotent (a job process re-sends an event whose answer it did not get, e.g.
# across a luxid restart), and each names the opcode it is about by index.


class Hello(msgspec.Struct, frozen=True, tag="hello", tag_field="event"):
    """The job process starts: send me my opcodes and where to begin."""


class Check(msgspec.Struct, frozen=True, tag="check", tag_field="event"):
    """Something may have changed (SIGUSR1, a lock-wait timeout): what should I do now?"""

    index: Count


class Waiting(msgspec.Struct, frozen=True, tag="waiting", tag_field="event"):
    """Opcode `index` waits for its locks (its status becomes `waiting`)."""

    index: Count


class Running(msgspec.Struct, frozen=True, tag="running", tag_field="event"):
    """Opcode `index` holds its locks: may it run?  (Its status becomes `running`.)"""

    index: Count


class Log(msgspec.Struct, frozen=True, tag="log", tag_field="event"):
    """A log entry of opcode `index`; `seq` counts the opcode's entries from 0 (dedup)."""

    index: Count
    seq: Count
    type: str
    message: Any


class Priority(msgspec.Struct, frozen=True, tag="priority", tag_field="event"):
    """The lock-timeout strategy raised opcode `index`'s priority to `priority`."""

    index: Count
    priority: numbers.Priority


class Finish(msgspec.Struct, frozen=True, tag="finish", tag_field="event"):
    """Opcode `index` ended: success (result), error (result = message) or canceled."""

    index: Count
    status: FinalizedStatus
    result: Any = None


JobEvent = Hello | Check | Waiting | Running | Log | Priority | Finish


class Directive(msgspec.Struct, frozen=True):
    """luxid's answer to a job event.

    `stop`: end the job process now (after freeing its locks): the job is finalized,
    canceled or paused.  Otherwise `index` is the opcode to work on and `priority` its
    current priority.  `ops` (the job's opcodes) comes with the answer to Hello only.
    """

    stop: bool
    index: int | None = None
    priority: int = 0
    ops: list[Opcode] | None = None


class DrainStatus(msgspec.Struct, frozen=True, kw_only=True):
    """A drain as `query_drains` and `drain_node` report it (docs/contracts.md#drain-methods).

    `mode` is "hard" or "soft" for the queue drain and null for a node drain; `total` and
    `remaining` count instances for a node, jobs for the queue; `blocked` lists
    `[instance_or_job, reason]`; `jobs` are the drain's job ids.  `status` is `scheduled`
    until a scheduled drain's `start_at`, then `draining`; `started_at` is when it started
    (for a scheduled one, when it is to start).
    """

    target: str
    status: DrainStatusName
    started_at: float
    updated_at: float
    deadline: float | None
    max_parallel: int
    mode: Literal["hard", "soft"] | None
    message: str
    deadline_reached: bool
    completed_at: float | None
    total: int
    remaining: int
    running: int
    blocked: list[list[str | int]]
    shut_down: list[str]
    jobs: list[int]
    # When a scheduled drain starts (docs/contracts.md#scheduled-drains); null when it
    # started when asked for (and from a luxid that predates scheduled drains).
    start_at: float | None = None


class DrainPlan(msgspec.Struct, frozen=True, kw_only=True):
    """What plan_node_drain answers (docs/contracts.md#drain-plans): the node's name; the
    moves `[instance, target node]` drain_node would make now; the instances no node has
    room for (or a budget holds), `[instance, reason]`; the disruption budgets that pace
    it, `[name, max_disrupted, members on the node]`; and the number of waves."""

    node: str
    moves: list[Annotated[list[str], Meta(min_length=2, max_length=2)]]
    blocked: list[Annotated[list[str], Meta(min_length=2, max_length=2)]]
    budgets: list[Annotated[list[str | int], Meta(min_length=3, max_length=3)]]
    waves: int


# [serial, timestamp, message]
DrainEvent = list[int | float | str]


class DrainChange(msgspec.Struct, frozen=True):
    """What wait_for_drain_change answers when the drain has new events."""

    status: DrainStatus
    events: list[DrainEvent]


# -- disruption budgets (docs/contracts.md#disruption-budgets) ---------------------------


class BudgetRow(msgspec.Struct, frozen=True, kw_only=True):
    """A budget as query_budgets shows it: its members, the disrupted ones with why
    (`down`, or `job N OP_ID`), and its events [ts, message] (starts past it)."""

    name: str
    tags: list[str]
    max_disrupted: int
    members: list[str]
    disrupted: list[list[str]]
    events: list[list[float | str]]


class LuxiApi(DaemonApi):
    """The job queue, its filters, and the reports of job processes."""

    # -- jobs ------------------------------------------------------------------------

    @rpc(InvalidOpcode, QueueDrained, InvalidParams, StorageError, audit="queue")
    def submit_job(self, ops: Job, actor: AuditActor = None) -> int:
        """Queue a job (a list of opcodes); its id.  A job a REJECT rule applies to is
        stored as canceled before this returns."""

    @rpc(InvalidParams, QueueDrained, StorageError, audit="queue")
    def submit_many_jobs(
        self, jobs: list[list[Opcode]], actor: AuditActor = None
    ) -> list[SubmitOutcome]:
        """Queue several jobs at once; per job [true, id] or [false, message]."""

    @rpc(InvalidParams, StorageError, reissue=True)
    def query_jobs(self, ids: list[int] | None, fields: list[str]) -> list[list[Any] | None]:
        """One row of the requested fields per id (null for unknown ids; ids null: all
        non-archived jobs)."""

    @rpc(NotFound, InvalidParams, StorageError, reissue=True)
    def wait_for_job_change(
        self,
        job_id: JobId,
        fields: list[str],
        prev_values: list[Any] | None,
        prev_log_serial: int | None,
        timeout: Seconds,
    ) -> JobChange | str:
        """Return as soon as the fields differ from prev_values, newer log entries exist or
        the job is finalized; "nochange" at the timeout."""

    @rpc(NotFound, StorageError, audit=target("job", "job_id"))
    def cancel_job(self, job_id: JobId, kill: bool = False, actor: AuditActor = None) -> Verdict:
        """Cancel a job: queued or waiting at once; running at its next safe point (SIGTERM),
        or at once with `kill` (SIGKILL, the job ends in error "killed")."""

    @rpc(NotFound, InvalidParams, StorageError, audit=target("job", "job_id"))
    def change_job_priority(
        self, job_id: JobId, priority: numbers.Priority, actor: AuditActor = None
    ) -> Verdict:
        """Change the priority of a queued or running job's remaining opcodes."""

    @rpc(NotFound, StorageError, audit=target("job", "job_id"))
    def archive_job(self, job_id: JobId, actor: AuditActor = None) -> bool:
        """Archive a finalized job; false if it is not finalized or already archived."""

    @rpc(InvalidParams, StorageError, audit="queue")
    def auto_archive_jobs(
        self, age: float, timeout: Seconds | None = None, actor: AuditActor = None
    ) -> Annotated[list[int], Meta(min_length=2, max_length=2)]:
        """Archive finalized jobs that ended more than `age` seconds ago, for at most
        `timeout` seconds; [archived, remaining]."""

    @rpc(StorageError, audit="queue")
    def set_drain_flag(self, flag: bool, actor: AuditActor = None) -> bool:
        """Set or clear the drain flag (while set, submits fail with QueueDrained)."""

    @rpc(reissue=True)
    def query_queue_info(self) -> QueueInfo:
        """Drain flag, max running jobs, running count, jobs per status, filter count."""

    @rpc(reissue=True)
    def query_queue_overview(self, queued: Count, recent: Count) -> QueueOverview:
        """Which jobs an overview shows, chosen by luxid so that only they need reading:
        the first `queued` queued, every active, the latest `recent` finished."""

    @rpc(reissue=True)
    def wait_queue_change(self, since_serial: int, timeout: Seconds) -> int:
        """The queue's change serial as soon as it is not `since_serial` (a job was added,
        changed or archived, or the drain flag set), or the current one at the timeout;
        `timeout` 0 reads it.  Event-driven, for watchers such as the dashboard."""

    @rpc(NotFound, Timeout, reissue=True)
    def why_job(self, job_id: JobId) -> WhyJob:
        """Why a job is not running (docs/contracts.md#why-a-job-waits): the chain of what
        holds it, link by link — a filter, a rate limit, the slots, a job it depends on,
        a lock (then what holds the lock's holder) — ending at something that is not
        waiting, or at a cycle; at most 8 Steps.  NotFound for an unknown job."""

    # -- filters (docs/contracts.md#filters) -----------------------------------------

    @rpc(FilterError, InvalidParams, StorageError, audit="filter/<uuid>")
    def replace_filter(
        self,
        uuid: str | None,
        priority: int,
        predicates: list[Any],
        action: Any,
        reason: list[Any],
        actor: AuditActor = None,
    ) -> str:
        """Add (uuid null, or a uuid not in use) or replace a filter rule; its uuid."""

    @rpc(NotFound, StorageError, audit=target("filter", "uuid"))
    def delete_filter(self, uuid: str, actor: AuditActor = None) -> None:
        """Remove a filter rule."""

    @rpc(NotFound, InvalidParams, reissue=True)
    def query_filters(
        self, uuids: list[str] | None = None, fields: list[str] | None = None
    ) -> list[list[Any]]:
        """Rows of the requested fields (default all) for the given filters (default all,
        sorted by uuid)."""

    # -- disruption budgets (docs/contracts.md#disruption-budgets) -------------------

    @rpc(InvalidParams, StorageError, audit=target("budget", "name"))
    def set_budget(
        self, name: str, tags: list[str], max_disrupted: int, actor: AuditActor = None
    ) -> BudgetRow:
        """Add a disruption budget, or replace the one of that name: at most
        `max_disrupted` of the instances carrying one of `tags` disrupted at once."""

    @rpc(NotFound, StorageError, audit=target("budget", "name"))
    def delete_budget(self, name: str, actor: AuditActor = None) -> None:
        """Remove a disruption budget."""

    @rpc(reissue=True)
    def query_budgets(self) -> list[BudgetRow]:
        """Every disruption budget, by name, with its members and disrupted members."""

    # -- job processes (docs/contracts.md#job-processes-and-opcodes) -----------------

    @rpc(PermissionDenied, NotFound, InvalidParams, StorageError, reissue=True)
    def job_report(self, job_id: JobId, event: JobEvent) -> Directive:
        """A job process reports on its job; only the job's recorded process may call it
        (checked with SO_PEERCRED).  Answers what the job process should do next."""

    # -- drains (docs/contracts.md#drains) -------------------------------------------

    @rpc(NotFound, InvalidParams, StorageError, audit=target("node", "node"))
    def drain_node(
        self,
        node: str,
        deadline: float | None = 3600,
        max_parallel: int = 1,
        priority: int = 0,
        message: str = "",
        start_at: float | None = None,
        actor: AuditActor = None,
    ) -> DrainStatus:
        """Drain a node's primary instances, at most max_parallel moves at once, before a
        deadline in seconds from now (null: none; 0: now); on a node already draining,
        change its deadline, max_parallel, priority and message.  With start_at (seconds
        since the epoch) ahead, the drain is `scheduled` until then and changes nothing;
        the deadline then counts from start_at; a start_at already past starts it now."""

    @rpc(NotFound, InvalidParams, StorageError, reissue=True)
    def plan_node_drain(self, node: str, max_parallel: int = 1) -> DrainPlan:
        """What drain_node would do now, changing nothing: each instance's target by the
        drain's own placement (every planned move counted), the instances no node has room
        for, the budgets that pace it, and waves = ceil(moves / min(max_parallel, the
        tightest budget)).  NotFound for an unknown node."""

    @rpc(NotFound, StorageError, audit=target("node", "node"))
    def cancel_node_drain(
        self, node: str, keep_drained: bool = False, actor: AuditActor = None
    ) -> DrainStatus:
        """Cancel a node's drain: queued moves are canceled, running ones finish; the node's
        drained flag goes back to false unless keep_drained."""

    @rpc(InvalidParams, StorageError, audit="queue")
    def drain_queue(
        self,
        mode: Literal["hard", "soft"] = "hard",
        deadline: float | None = None,
        message: str = "",
        actor: AuditActor = None,
    ) -> DrainStatus:
        """Let the jobs accepted so far finish while new ones are refused (hard) or held
        (soft); at the deadline (seconds from now) cancel what is left."""

    @rpc(StorageError, audit="queue")
    def undrain_queue(self, actor: AuditActor = None) -> None:
        """End the queue drain: remove its filter rule, so held jobs start."""

    @rpc(reissue=True)
    def query_drains(self) -> list[DrainStatus]:
        """Every node drain in the configuration, and the queue drain if any."""

    @rpc(NotFound, InvalidParams, reissue=True)
    def wait_for_drain_change(
        self, target: str, since_event: int, timeout: float
    ) -> DrainChange | str:
        """Return the drain's status and its events with serial > since_event as soon as
        there are any ("node/<name>" or "queue"); "nochange" at the timeout."""
