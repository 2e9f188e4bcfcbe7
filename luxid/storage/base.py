"""The job store's seam (docs/architecture.md#storage): what luxid needs from durable
storage.

luxid keeps its live jobs in memory and decides everything on its event loop; a store only
keeps what luxid tells it, durably.  SQLite (luxid.storage.sqlite) is the embedded
implementation; luxid.storage.etcd puts etcd behind the same interface.  An implementation
must promise:

- **Durable before return.**  When the `with store.transaction() as tx:` block ends without
  an exception, every change made through `tx` is durable (fsync'd, or acknowledged by a
  quorum) — luxid answers clients and lets a job process run its next opcode (the
  opcode-running gate: the `running` report is answered only once committed) after that.
- **All or nothing.**  A transaction that raises changes nothing, on disk or in the store's
  memory; a storage failure raises client.errors.StorageError.
- **Order.**  Transactions are applied in the order they are committed; the writes of one
  transaction in the order they were made.  Only one transaction is open at a time (luxid's
  group commit, luxid.storage.group_commit, is the only writer and runs them one by one).
- **Ids.**  `last_job_id` is the highest job id ever inserted, durable with the insert; ids
  are allocated by luxid in memory above it and never reused, archived jobs included.
- **Archive.**  Archived jobs stay readable by id (`load_jobs`, `status_of`) but are not
  part of `load_live`.
- **Events.**  `append_events` numbers luxid's events (docs/contracts.md#events) and stores
  them in the same transaction as the change they tell of; once the block ended,
  `tx.events` holds them numbered.  Indexes are strictly increasing and never handed out
  twice, across restarts and failovers: on SQLite one above the last (the table's
  never-lowered sequence), on etcd derived from the revision of the write.  The store
  prunes them by the retention `load_events` was given.
- **Audit.**  `append_audit` stores audit entries (docs/contracts.md#audit-log) in the
  transaction of the change they tell of, numbered one above the last stored entry.

Reads may run on any thread; they see committed data only.
"""

from __future__ import annotations

from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Protocol

from client._server.write_placement import SyncMode
from client.api.common import Event
from client.audit import AuditEntry, Query
from client.events import EventRing, Retention
from luxid.jobs import Job


class StoreTransaction(Protocol):
    """One open write transaction (valid inside its `with` block only; `events` after)."""

    events: list[Event]
    """The events this transaction stored, numbered (complete once the block ended)."""

    def append_events(self, drafts: Iterable[Event]) -> None:
        """Store events (not numbered yet) with this transaction; the store numbers them."""

    def append_audit(self, entries: Iterable[AuditEntry]) -> None:
        """Store audit entries with this transaction, numbered one above the last stored
        (docs/contracts.md#audit-log)."""

    def insert(self, jobs: Iterable[Job]) -> None:
        """Store new jobs; their ids are above every id ever inserted (AlreadyExists else)."""

    def update(self, jobs: Iterable[Job]) -> None:
        """Store the new state of existing live jobs (NotFound if one is unknown)."""

    def archive(self, ids: Iterable[int]) -> list[int]:
        """Archive finalized live jobs; returns the ids actually archived."""

    def set_meta(self, key: str, value: int) -> None:
        """Store a small durable setting of the queue (e.g. the drain flag)."""

    def reserve_ids(self, last_id: int) -> None:
        """Count every id up to `last_id` as allocated (a copied store continues above
        the ids of its source); never lowers the counter."""


class JobStore(Protocol):
    """Durable jobs: load at start, batches of changes, the archive, the id counter."""

    @property
    def last_job_id(self) -> int:
        """The highest job id ever inserted (committed)."""

    @property
    def sync_mode(self) -> SyncMode:
        """Where the group commit may run transactions: "auto" lets a lone writer's run on
        the event loop (a local disk); "thread" keeps them all off it (a remote store)."""

    def load_live(self) -> list[Job]:
        """Every non-archived job, by id, with its log entries."""

    def load_jobs(self, ids: Iterable[int]) -> dict[int, Job]:
        """The stored jobs (archived or not) among `ids`; unknown ids are left out."""

    def load_job(self, job_id: int) -> Job | None:
        """One stored job (archived or not), or None."""

    def status_of(self, job_id: int) -> str | None:
        """The stored status of one job (archived included), None if unknown."""

    def meta(self, key: str, default: int = 0) -> int:
        """A setting stored with `StoreTransaction.set_meta`, or `default`."""

    def load_events(self, retention: Retention) -> EventRing:
        """The kept events, with the newest index ever and the highest one dropped; from
        now on the store keeps events by `retention`."""

    def query_audit(self, query: Query) -> list[AuditEntry]:
        """The audit entries `query` asks for, newest last."""

    def prune_audit(self, now: float, days: float) -> int:
        """Drop the audit entries retention no longer keeps; how many went."""

    def transaction(self) -> AbstractContextManager[StoreTransaction]:
        """A write transaction, durable when its block ends (see the module docstring)."""

    def auto_archive(self, older_than: float, limit: int) -> tuple[list[int], int]:
        """Archive up to `limit` finalized jobs that ended before `older_than` (oldest ids
        first), in one transaction; (archived ids, how many such jobs remain)."""

    def close(self) -> None:
        """Release the store (pending transactions are committed or were never begun)."""
