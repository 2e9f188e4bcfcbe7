"""What the drain core asks the luxid shell to do (plain data, applied in order).

- `Submit`: submit a job of `ops`; report the new id with `record_submitted` (or a refusal
  with `submit_refused`) before the next step, so the core never asks twice.
- `CancelJob`: `cancel_job(job_id, kill)`.
- `ChangePriority`: `change_job_priority(job_id, priority)` for a drain job still queued.
- `PutFilter`: add or replace (upsert) the queue drain's filter rule `uuid` with the
  predicates of docs/contracts.md#queue-drain and `action`; report its watermark with
  `queue_drain.filter_set`.
- `DeleteFilter`: remove the queue drain's rule.

Every effect names the drain (`target`) it belongs to.
"""

from __future__ import annotations

from typing import Any, Final, TypeAlias

import msgspec

from luxid.drains.record import JobKind

# Jobs accepted after the rule (id > its watermark) are held or refused
# (docs/contracts.md#queue-drain).
QUEUE_PREDICATES: Final = [["jobid", [">", "id", "watermark"]]]
TAG_SOURCE: Final = "lw:drain-job"


class Submit(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Submit one job for a drain.

    Its opcodes' reason trails carry `[TAG_SOURCE, tag, ts]`, so that after a crash
    between the submit and the record write the job can be found again (`adopt_jobs`).
    """

    target: str
    tag: str
    kind: JobKind
    instance: str | None = None
    node: str | None = None
    ops: list[dict[str, Any]]


class CancelJob(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Cancel a drain's job (kill: SIGKILL a running one)."""

    target: str
    job_id: int
    kill: bool = False


class ChangePriority(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Give a drain's unfinished job the drain's new priority."""

    target: str
    job_id: int
    priority: int


class PutFilter(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Add or replace the queue drain's filter rule."""

    target: str
    uuid: str
    action: str
    reason: list[list[Any]]
    predicates: list[Any] = msgspec.field(default_factory=lambda: list(QUEUE_PREDICATES))


class DeleteFilter(msgspec.Struct, frozen=True, kw_only=True, tag=True):
    """Remove the queue drain's filter rule."""

    target: str
    uuid: str


Effect: TypeAlias = Submit | CancelJob | ChangePriority | PutFilter | DeleteFilter
