"""The audit log's SQLite table (docs/contracts.md#audit-log): its schema, inserts, queries
and retention on any connection.  One format for every file that holds entries: the
daemons' (client._server.audit_sql, luxid's job store) and lw-rapi's own
(client.audit_file), which public client code writes.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from typing import Final

import msgspec

from client.audit import AuditEntry, Query

SCHEMA: Final = (
    "CREATE TABLE IF NOT EXISTS audit ("
    " seq INTEGER PRIMARY KEY, ts REAL NOT NULL, actor TEXT NOT NULL,"
    " target TEXT NOT NULL, entry BLOB NOT NULL)",
)
"""One table keyed by seq, no other index: an entry commits with the change it tells of,
and each page more in that commit is paid by every audited call; queries and retention
are rare and walk seq order, which is time order (entries are numbered as they come)."""
_ENCODE: Final = msgspec.msgpack.Encoder().encode
decode_entry: Final = msgspec.msgpack.Decoder(AuditEntry).decode
"""One stored entry (the `entry` column) back into an AuditEntry."""
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
    return [decode_entry(blob) for (blob,) in reversed(found.fetchall())]


def last_seq(db: sqlite3.Connection) -> int:
    """The highest seq stored (0: none)."""
    (seq,) = db.execute("SELECT coalesce(max(seq), 0) FROM audit").fetchone()
    return int(seq)


def prune(db: sqlite3.Connection, now: float, days: float, count: int) -> int:
    """Drop what retention no longer keeps: entries older than `days`, and all but the
    newest `count`.  Answers how many were dropped.  The first entry young enough is found
    by bisecting seq order (time order), a few lookups however many entries are kept."""
    newest = last_seq(db)
    young = _first_at_or_after(db, now - days * DAY)
    keep_from = max(newest - count + 1, newest + 1 if young is None else young)
    return db.execute("DELETE FROM audit WHERE seq < ?", (keep_from,)).rowcount


def _first_at_or_after(db: sqlite3.Connection, cutoff: float) -> int | None:
    """The lowest seq of an entry with ts >= cutoff, entries taken in time order (None:
    every entry is older).  Bisects seq values x by the time of the first entry at or
    after x, which grows with x (seqs may have gaps: pruned, or a copy's)."""
    low, high = db.execute("SELECT min(seq), max(seq) FROM audit").fetchone()
    if high is None or _entry_at(db, high)[1] < cutoff:
        return None
    while low < high:
        mid = (low + high) // 2
        if _entry_at(db, mid)[1] >= cutoff:
            high = mid
        else:
            low = mid + 1
    return _entry_at(db, low)[0]


def _entry_at(db: sqlite3.Connection, seq: int) -> tuple[int, float]:
    """(seq, ts) of the first entry at or after `seq` (one exists)."""
    found = db.execute("SELECT seq, ts FROM audit WHERE seq >= ? ORDER BY seq LIMIT 1", (seq,))
    row = found.fetchone()
    return int(row[0]), float(row[1])
