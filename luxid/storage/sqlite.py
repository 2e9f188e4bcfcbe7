"""The embedded job store of luxid (luxid.storage.base's seam): one SQLite database (WAL,
synchronous=FULL).

Layout: `jobs(id, status, archived, age_ts, data)` where `data` is the msgpack-encoded Job
without its log entries, and `logs(job_id, serial, op_index, entry)` so appending a log
entry costs one small row, not a rewrite of the job. `meta` holds the highest job id ever
inserted, so ids stay strictly increasing and are never reused, whatever gets archived.
`events(idx, ts, data)` keeps luxid's events (docs/contracts.md#events): written in the
transaction of the change they tell of, numbered there one above the last (the table's
AUTOINCREMENT sequence, which SQLite keeps with the commit and never lowers, so an index is
never handed out twice, whatever is pruned or lost with a crash), pruned by the retention
rule in the same transactions.  `audit` (client._server.audit_sql) keeps luxid's audit
entries (docs/contracts.md#audit-log), written in the transaction of the change they tell
of.  (Schema version 1, unchanged: the events and audit tables are only added, and stores
written before them load as they are.)

Archived jobs stay in the database but never in memory: the store keeps only a small
per-live-job log-serial map, and loads archived jobs one by one on demand.

Every call is blocking. A commit is one fsync of the WAL (about 0.25 ms on the dev
machine); luxid runs every write in the group commit's worker thread
(luxid.storage.group_commit), which batches concurrent changes into one `transaction()`.
The store is thread-safe (one lock around the connection).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Final

import msgspec
from msgspec.structs import replace

from client import audit_table, errors
from client._server.write_placement import SyncMode
from client.api.common import Event
from client.audit import RETENTION_COUNT, AuditEntry, Query, number_entries
from client.events import EventRing, Retention, numbered
from client.vocabulary import FINALIZED_STATUSES
from luxid.jobs.model import Job, LogEntry, job_status
from luxid.storage import sqlite_events
from luxid.storage.jobdata import age_ts, attach_logs, strip

DB_FILENAME: Final = "jobs.sqlite"
SCHEMA_VERSION: Final = 1

_SCHEMA: Final = (
    """
CREATE TABLE IF NOT EXISTS meta (
    key   TEXT PRIMARY KEY,
    value INTEGER NOT NULL
) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS jobs (
    id       INTEGER PRIMARY KEY,
    status   TEXT NOT NULL,
    archived INTEGER NOT NULL DEFAULT 0,
    age_ts   REAL,
    data     BLOB NOT NULL
);
CREATE INDEX IF NOT EXISTS jobs_live ON jobs(id) WHERE archived = 0;
CREATE INDEX IF NOT EXISTS jobs_status ON jobs(archived, status);
CREATE TABLE IF NOT EXISTS logs (
    job_id   INTEGER NOT NULL,
    serial   INTEGER NOT NULL,
    op_index INTEGER NOT NULL,
    entry    BLOB NOT NULL,
    PRIMARY KEY (job_id, serial)
) WITHOUT ROWID;
INSERT OR IGNORE INTO meta(key, value) VALUES ('last_job_id', 0);
"""
    + sqlite_events.SCHEMA
    + ";\n".join(audit_table.SCHEMA)
)

_FINALIZED_SQL: Final = "(" + ", ".join(f"'{s}'" for s in sorted(FINALIZED_STATUSES)) + ")"

_job_encoder = msgspec.msgpack.Encoder()
_job_decoder = msgspec.msgpack.Decoder(Job)
_log_decoder = msgspec.msgpack.Decoder(LogEntry)


def default_path(state_dir: str | os.PathLike[str]) -> Path:
    """The job database's path in a state directory."""
    return Path(state_dir) / DB_FILENAME


def _decode(job_id: int, data: bytes, archived: int) -> Job:
    try:
        job = _job_decoder.decode(data)
    except msgspec.DecodeError as exc:
        raise errors.StorageError(f"job {job_id} is corrupt in the store: {exc}") from exc
    if job.archived != bool(archived):
        job = replace(job, archived=bool(archived))
    return job


def _attach_logs(job: Job, rows: Iterable[tuple[int, bytes]]) -> Job:
    """The job with its log entries (rows of (op_index, entry) in serial order)."""
    return attach_logs(job, ((index, _log_decoder.decode(entry)) for index, entry in rows))


class SqliteTransaction:
    """One open write transaction: everything done through it commits in one fsync.

    Obtained from `SqliteJobStore.transaction()`; valid only inside its `with` block.
    """

    def __init__(self, store: SqliteJobStore) -> None:
        self._store = store
        self._conn = store._conn
        self._last_id = store._last_id
        self._log_saved: dict[int, int] = {}
        self._dropped: set[int] = set()
        self._last_event = store._last_event
        self._last_audit = store._last_audit
        self.events: list[Event] = []  # numbered; durable once the block ended
        self.audit: list[AuditEntry] = []  # numbered; inserted as the block ends

    # --- events

    def append_events(self, drafts: Iterable[Event]) -> None:
        """Number the events one above the last and store them with this transaction."""
        events = numbered(drafts, self._last_event + 1)
        if not events:
            return
        sqlite_events.insert(self._conn, events)
        self._last_event = events[-1].index
        self.events += events
        store = self._store
        store._unpruned += len(events)
        if store._unpruned >= sqlite_events.PRUNE_EVERY:
            store._unpruned = 0
            sqlite_events.prune(self._conn, store.retention, events[-1])

    # --- inserts

    def append_audit(self, entries: Iterable[AuditEntry]) -> None:
        """Store the entries with this transaction (client.audit.number_entries): kept
        until the block ends, then inserted together (one statement for a whole group
        commit's entries, not one per call)."""
        numbered = number_entries(entries, self._last_audit)
        self.audit += numbered
        self._last_audit = max([self._last_audit, *(e.seq for e in numbered)])

    def insert(self, jobs: Iterable[Job]) -> None:
        """Store new jobs; each id must be above every id ever inserted, and the counter
        (`last_job_id`) moves up to the highest of them in the same transaction."""
        rows = []
        logs: list[tuple[int, int, int, bytes]] = []
        for job in jobs:
            if job.id <= self._last_id:
                raise errors.AlreadyExists(
                    f"job id {job.id} is not above the last one allocated ({self._last_id})"
                )
            self._last_id = job.id
            rows.append(self._row(job))
            logs.extend(self._log_rows(job, 0))
            self._log_saved[job.id] = job.log_serial
        if not rows:
            return
        self._conn.execute("UPDATE meta SET value = ? WHERE key = 'last_job_id'", (self._last_id,))
        try:
            self._conn.executemany(
                "INSERT INTO jobs(status, archived, age_ts, data, id) VALUES (?, ?, ?, ?, ?)",
                rows,
            )
        except sqlite3.IntegrityError as exc:
            raise errors.AlreadyExists(f"job id already stored: {exc}") from exc
        if logs:
            self._conn.executemany("INSERT INTO logs VALUES (?, ?, ?, ?)", logs)

    # --- updates

    def update(self, jobs: Iterable[Job]) -> None:
        """Write the new state of existing jobs; only log entries not yet stored are added."""
        for job in jobs:
            saved = self._saved_serial(job.id)
            status, _archived, age_ts, data, job_id = self._row(job)
            cur = self._conn.execute(
                "UPDATE jobs SET status = ?, age_ts = ?, data = ? WHERE id = ?",
                (status, age_ts, data, job_id),
            )
            if cur.rowcount != 1:
                raise errors.NotFound(f"job {job.id} is not in the store")
            logs = list(self._log_rows(job, saved))
            if logs:
                self._conn.executemany("INSERT OR REPLACE INTO logs VALUES (?, ?, ?, ?)", logs)
            self._log_saved[job.id] = max(saved, job.log_serial)

    def archive(self, ids: Iterable[int]) -> list[int]:
        """Archive finalized live jobs; returns the ids actually archived."""
        done = []
        for job_id in ids:
            cur = self._conn.execute(
                "UPDATE jobs SET archived = 1 WHERE id = ? AND archived = 0"
                f" AND status IN {_FINALIZED_SQL}",
                (job_id,),
            )
            if cur.rowcount == 1:
                done.append(job_id)
                self._dropped.add(job_id)
        return done

    def set_meta(self, key: str, value: int) -> None:
        """Store a small durable setting of the queue (e.g. the drain flag)."""
        if key == "last_job_id":
            raise errors.InvalidParams("last_job_id moves with the inserted jobs")
        self._conn.execute(
            "INSERT OR REPLACE INTO meta(key, value) VALUES (?, ?)", (key, int(value))
        )

    def reserve_ids(self, last_id: int) -> None:
        """Count every id up to `last_id` as allocated (never lowers the counter)."""
        if last_id > self._last_id:
            self._last_id = last_id
            self._conn.execute(
                "UPDATE meta SET value = ? WHERE key = 'last_job_id'", (self._last_id,)
            )

    # --- helpers

    def _saved_serial(self, job_id: int) -> int:
        if job_id in self._log_saved:
            return self._log_saved[job_id]
        known = self._store._log_saved.get(job_id)
        if known is not None:
            return known
        row = self._conn.execute(
            "SELECT COALESCE(MAX(serial), 0) FROM logs WHERE job_id = ?", (job_id,)
        ).fetchone()
        return int(row[0])

    @staticmethod
    def _row(job: Job) -> tuple[str, int, float | None, bytes, int]:
        return (
            job_status(job),
            int(job.archived),
            age_ts(job),
            _job_encoder.encode(strip(job)),
            job.id,
        )

    @staticmethod
    def _log_rows(job: Job, after: int) -> Iterator[tuple[int, int, int, bytes]]:
        for index, op in enumerate(job.ops):
            for entry in op.log:
                if entry.serial > after:
                    yield (job.id, entry.serial, index, _job_encoder.encode(entry))


class SqliteJobStore:
    """The job database. Open with `SqliteJobStore.open(path)`; close with `close()`."""

    sync_mode: SyncMode = "auto"  # a local disk: a lone writer commits on the event loop

    def __init__(self, conn: sqlite3.Connection, path: Path) -> None:
        self._conn = conn
        self.path = path
        self._lock = threading.RLock()
        self._log_saved: dict[int, int] = {}
        row = conn.execute("SELECT value FROM meta WHERE key = 'last_job_id'").fetchone()
        self._last_id: int = int(row[0])
        row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'events'").fetchone()
        self._last_event: int = int(row[0]) if row else 0
        self._last_audit = audit_table.last_seq(conn)
        self.retention = Retention()
        self._unpruned = 0

    @classmethod
    def open(cls, path: str | os.PathLike[str]) -> SqliteJobStore:
        """Open (creating if needed) the database at `path` with WAL and synchronous=FULL."""
        db_path = Path(path)
        conn: sqlite3.Connection | None = None
        try:
            db_path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not db_path.exists()
            conn = sqlite3.connect(
                db_path, isolation_level=None, check_same_thread=False, timeout=10.0
            )
            if fresh:
                os.chmod(db_path, 0o600)
            mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise errors.StorageError(f"{db_path}: cannot switch to WAL (got {mode})")
            conn.execute("PRAGMA synchronous=FULL")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version > SCHEMA_VERSION:
                raise errors.StorageError(
                    f"{db_path}: schema version {version} is newer than {SCHEMA_VERSION}"
                )
            conn.execute("BEGIN IMMEDIATE")
            try:
                for statement in _SCHEMA.split(";"):
                    if statement.strip():
                        conn.execute(statement)
                conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            return cls(conn, db_path)
        except BaseException as exc:
            if conn is not None:
                conn.close()
            if isinstance(exc, sqlite3.Error | OSError):
                raise errors.StorageError(f"{db_path}: cannot open job store: {exc}") from exc
            raise

    def close(self) -> None:
        """Close the database (checkpointing the WAL)."""
        with self._lock:
            self._conn.close()

    def __enter__(self) -> SqliteJobStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --------------------------------------------------------------- writes

    @contextmanager
    def transaction(self) -> Iterator[SqliteTransaction]:
        """A write transaction committed (durably) when the block ends, rolled back on error.

        Use it to batch several changes into one fsync: concurrent submits, the status
        changes of one scheduling pass. A sqlite failure raises StorageError and nothing
        is changed, on disk or in the store's memory.
        """
        with self._lock:
            try:
                self._conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise errors.StorageError(f"cannot start a transaction: {exc}") from exc
            tx = SqliteTransaction(self)
            try:
                yield tx
                if tx.audit:
                    audit_table.insert(self._conn, tx.audit)
                self._conn.execute("COMMIT")
            except BaseException as exc:
                with suppress(sqlite3.Error):
                    self._conn.execute("ROLLBACK")
                tx.events = []
                if isinstance(exc, sqlite3.Error):
                    raise errors.StorageError(f"job store write failed: {exc}") from exc
                raise
            self._last_id = tx._last_id
            self._last_event = tx._last_event
            self._last_audit = tx._last_audit
            self._log_saved.update(tx._log_saved)
            for job_id in tx._dropped:
                self._log_saved.pop(job_id, None)

    def load_events(self, retention: Retention) -> EventRing:
        """The kept events as a ring under `retention`, which later transactions prune by
        too (luxid.storage.sqlite_events.load_ring)."""
        self.retention = retention
        with self._lock:
            return sqlite_events.load_ring(
                self._conn, retention, self._last_event, self.older_events
            )

    def older_events(self, after: int, upto: int, limit: int) -> tuple[int, list[bytes]]:
        """The events kept here but not in the ring's memory (client.events.OlderEvents)."""
        with self._lock:
            return sqlite_events.read_older(self._conn, self._last_event, after, upto, limit)

    def query_audit(self, query: Query) -> list[AuditEntry]:
        """The audit entries `query` asks for, newest last."""
        with self._lock:
            try:
                return audit_table.select(self._conn, query)
            except sqlite3.Error as exc:
                raise errors.StorageError(f"audit log read failed: {exc}") from exc

    def prune_audit(self, now: float, days: float) -> int:
        """Drop the audit entries retention no longer keeps, in a transaction of its own."""
        with self.transaction():
            return audit_table.prune(self._conn, now, days, RETENTION_COUNT)

    def auto_archive(self, older_than: float, limit: int) -> tuple[list[int], int]:
        """Archive finalized jobs that ended before `older_than` (epoch seconds).

        At most `limit` jobs (oldest ids first) in this call, so the shell can honour a
        timeout by calling it in chunks. Returns (archived ids, how many such jobs remain).
        """
        where = (
            "FROM jobs WHERE archived = 0 AND age_ts IS NOT NULL AND age_ts < ?"
            f" AND status IN {_FINALIZED_SQL}"
        )
        with self.transaction() as tx:
            total = self._conn.execute(f"SELECT COUNT(*) {where}", (older_than,)).fetchone()[0]
            cap = max(0, limit)
            ids = [
                r[0]
                for r in self._conn.execute(
                    f"SELECT id {where} ORDER BY id LIMIT ?", (older_than, cap)
                )
            ]
            done = tx.archive(ids)
        return done, int(total) - len(done)

    # ---------------------------------------------------------------- reads

    def _read(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise errors.StorageError(f"job store read failed: {exc}") from exc

    def meta(self, key: str, default: int = 0) -> int:
        """A setting stored with `SqliteTransaction.set_meta`, or `default`."""
        rows = self._read("SELECT value FROM meta WHERE key = ?", (key,))
        return int(rows[0][0]) if rows else default

    @property
    def last_job_id(self) -> int:
        """The highest job id ever allocated (committed); the filters' watermark."""
        return self._last_id

    def load_live(self) -> list[Job]:
        """Every non-archived job, by id, with its logs (luxid's in-memory queue at start).

        The non-finalized ones carry process_id/process_start, so the shell can reattach
        to live job processes and fail the dead ones (`process_exited`).
        """
        with self._lock:  # both reads see the same committed state
            rows = self._read("SELECT id, archived, data FROM jobs WHERE archived = 0 ORDER BY id")
            log_rows = self._read(
                "SELECT l.job_id, l.op_index, l.entry FROM jobs j JOIN logs l ON l.job_id = j.id"
                " WHERE j.archived = 0 ORDER BY l.job_id, l.serial"
            )
        per_job: dict[int, list[tuple[int, bytes]]] = {}
        for job_id, op_index, entry in log_rows:
            per_job.setdefault(job_id, []).append((op_index, entry))
        jobs = []
        saved: dict[int, int] = {}
        for job_id, archived, data in rows:
            job = _attach_logs(_decode(job_id, data, archived), per_job.get(job_id, ()))
            saved[job_id] = job.log_serial
            jobs.append(job)
        with self._lock:
            self._log_saved.update(saved)
        return jobs

    def load_jobs(self, ids: Iterable[int]) -> dict[int, Job]:
        """The stored jobs (archived or not) among `ids`; unknown ids are left out."""
        wanted = sorted({int(i) for i in ids})
        out: dict[int, Job] = {}
        for chunk_start in range(0, len(wanted), 500):
            chunk = wanted[chunk_start : chunk_start + 500]
            marks = ",".join("?" * len(chunk))
            with self._lock:  # both reads see the same committed state
                rows = self._read(
                    f"SELECT id, archived, data FROM jobs WHERE id IN ({marks})", chunk
                )
                log_rows = self._read(
                    f"SELECT job_id, op_index, entry FROM logs WHERE job_id IN ({marks})"
                    " ORDER BY job_id, serial",
                    chunk,
                )
            per_job: dict[int, list[tuple[int, bytes]]] = {}
            for job_id, op_index, entry in log_rows:
                per_job.setdefault(job_id, []).append((op_index, entry))
            for job_id, archived, data in rows:
                out[job_id] = _attach_logs(_decode(job_id, data, archived), per_job.get(job_id, ()))
        return out

    def load_job(self, job_id: int) -> Job | None:
        """One stored job (archived or not), or None."""
        return self.load_jobs([job_id]).get(job_id)

    def statuses(self, ids: Iterable[int]) -> dict[int, str]:
        """The stored status of each known job among `ids` (archived included)."""
        wanted = sorted({int(i) for i in ids})
        out: dict[int, str] = {}
        for chunk_start in range(0, len(wanted), 500):
            chunk = wanted[chunk_start : chunk_start + 500]
            marks = ",".join("?" * len(chunk))
            for job_id, status in self._read(
                f"SELECT id, status FROM jobs WHERE id IN ({marks})", chunk
            ):
                out[job_id] = status
        return out

    def status_of(self, job_id: int) -> str | None:
        """The stored status of one job (archived included), None if unknown."""
        return self.statuses([job_id]).get(job_id)
