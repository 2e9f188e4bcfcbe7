"""Audit entries in SQLite (docs/contracts.md#audit-log): the table, its queries and its
retention, for any connection; and `AuditDb`, a file of its own (`audit.sqlite` in a
state directory).
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Final, TypeVar

import msgspec

from client.audit import AuditEntry, Query

log = logging.getLogger(__name__)
T = TypeVar("T")

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS audit ("
    " seq INTEGER PRIMARY KEY, ts REAL NOT NULL, actor TEXT NOT NULL,"
    " target TEXT NOT NULL, entry BLOB NOT NULL)",
    "CREATE INDEX IF NOT EXISTS audit_ts ON audit (ts)",
)
_ENCODE: Final = msgspec.msgpack.Encoder().encode
_DECODE: Final = msgspec.msgpack.Decoder(AuditEntry).decode
DAY: Final = 86_400.0


def create(db: sqlite3.Connection) -> None:
    """Make the audit table and its index where they are missing."""
    for statement in SCHEMA:
        db.execute(statement)


def rows(entries: Iterable[AuditEntry]) -> list[tuple[int, float, str, str, bytes]]:
    """The table's rows for `entries` (numbered)."""
    return [(e.seq, e.ts, e.actor, e.target, _ENCODE(e)) for e in entries]


def insert(db: sqlite3.Connection, entries: Iterable[AuditEntry]) -> None:
    """Add numbered entries (an entry already there, replayed, is left as it is)."""
    db.executemany("INSERT OR IGNORE INTO audit VALUES (?, ?, ?, ?, ?)", rows(entries))


def select(db: sqlite3.Connection, query: Query) -> list[AuditEntry]:
    """The entries `query` asks for: the newest `limit`, newest last."""
    where, args = [], []
    for clause, value in (
        ("ts >= ?", query.since),
        ("ts < ?", query.until),
        ("actor = ?", query.actor),
        ("target = ?", query.target),
    ):
        if value is not None:
            where.append(clause)
            args.append(value)
    sql = "SELECT entry FROM audit"
    if where:
        sql += " WHERE " + " AND ".join(where)
    found = db.execute(sql + " ORDER BY seq DESC LIMIT ?", (*args, max(0, query.limit)))
    return [_DECODE(blob) for (blob,) in reversed(found.fetchall())]


def last_seq(db: sqlite3.Connection) -> int:
    """The highest seq stored (0: none)."""
    (seq,) = db.execute("SELECT coalesce(max(seq), 0) FROM audit").fetchone()
    return int(seq)


def prune(db: sqlite3.Connection, now: float, days: float, count: int) -> int:
    """Drop what retention no longer keeps: entries older than `days`, and all but the
    newest `count`.  Answers how many were dropped."""
    newest = last_seq(db)
    cur = db.execute(
        "DELETE FROM audit WHERE ts < ? OR seq <= ?", (now - days * DAY, newest - count)
    )
    return cur.rowcount


class AuditDb:
    """A file holding only audit entries (`audit.sqlite` in a daemon's state directory).

    `durable=True`: every commit is synced (the file is where entries are durable).
    `durable=False`: commits are not synced (the entries are durable elsewhere first, e.g.
    wconfd's journal) and `sync()` makes them durable before that copy is dropped; it
    may run on another thread while this connection goes on inserting."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL syncs only at checkpoints (see `sync`), FULL at every commit.
        self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        create(self.db)
        self.db.commit()

    def insert(self, entries: Iterable[AuditEntry]) -> None:
        """Add numbered entries (replays are left as they are), one transaction."""
        with self.db:
            insert(self.db, entries)

    def select(self, query: Query) -> list[AuditEntry]:
        """The entries `query` asks for, newest last."""
        return select(self.db, query)

    def last_seq(self) -> int:
        """The highest seq in the file (0: none)."""
        return last_seq(self.db)

    def prune(self, now: float, days: float, count: int) -> int:
        """Apply retention; how many entries were dropped."""
        with self.db:
            return prune(self.db, now, days, count)

    def sync(self) -> None:
        """Make every entry committed so far durable: a checkpoint on a connection of its
        own syncs the log first (a passive one never blocks the inserting connection)."""
        other = sqlite3.connect(self.path)
        try:
            other.execute("PRAGMA synchronous=FULL")
            other.execute("PRAGMA wal_checkpoint(PASSIVE)")
        finally:
            other.close()

    def close(self) -> None:
        """Close the file."""
        self.db.close()
