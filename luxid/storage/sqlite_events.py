"""luxid's events in its SQLite job store (docs/contracts.md#events): the `events` table,
written in the transaction of the change each tells of, pruned by the retention rule in
the same transactions, and read back into the ring at open or on demand for the older
ones.  Functions over an open connection; luxid.storage.sqlite holds the lock and the
transaction."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Final

import msgspec

from client.api.common import Event
from client.events import EventRing, OlderEvents, Retention

SCHEMA: Final = """
CREATE TABLE IF NOT EXISTS events (
    idx  INTEGER PRIMARY KEY AUTOINCREMENT,
    ts   REAL NOT NULL,
    data BLOB NOT NULL
);
"""
PRUNE_EVERY: Final = 1000
"""Events are pruned once this many were appended since the last pruning (and at open)."""

_event_json = msgspec.json.Encoder()  # events are kept as JSON: loaded without decoding


def insert(conn: sqlite3.Connection, events: Sequence[Event]) -> None:
    """Store numbered events (inside the open transaction)."""
    conn.executemany(
        "INSERT INTO events(idx, ts, data) VALUES (?, ?, ?)",
        [(e.index, e.ts, _event_json.encode(e)) for e in events],
    )


def prune(conn: sqlite3.Connection, retention: Retention, newest: Event) -> None:
    """Drop the events the retention lets go (inside the open transaction)."""
    min_age = retention.min_age
    upto = newest.index - retention.keep
    if min_age is not None:
        # Only below the oldest event still young (events are numbered in time order;
        # an old one above it stays a while longer, never less): found by a walk from
        # the oldest, so a prune costs what goes, not what stays (`DELETE ... WHERE ts <
        # ?` read every young event each time: 0.3 s per 1,000 events with a million of
        # them kept).
        young = conn.execute(
            "SELECT idx FROM events WHERE idx <= ? AND ts >= ? ORDER BY idx LIMIT 1",
            (upto, newest.ts - min_age),
        ).fetchone()
        if young is not None:
            upto = young[0] - 1
    conn.execute("DELETE FROM events WHERE idx <= ?", (upto,))


def load_ring(
    conn: sqlite3.Connection, retention: Retention, last_event: int, older: OlderEvents
) -> EventRing:
    """The kept events as a ring under `retention`; the ring knows the newest index ever
    (`last_event`) and that the older ones are gone.

    Only the newest `keep` are read into memory: with the age floor on (the default rule)
    the ones beyond them that it still keeps stay in the table, read on demand
    (`older`), so a burst of jobs costs neither memory nor start time."""
    first = conn.execute("SELECT MIN(idx) FROM events").fetchone()[0]
    rows = conn.execute(
        "SELECT idx, data FROM events WHERE idx > ? ORDER BY idx", (last_event - retention.keep,)
    ).fetchall()
    if retention.min_age is None:  # a count only: the ring holds all it keeps
        ring = EventRing(retention, pruned=rows[0][0] - 1 if rows else last_event)
    else:
        pruned = first - 1 if first is not None else last_event
        ring = EventRing(retention, pruned=pruned, older=older)
        ring.spilled = rows[0][0] - 1 if rows else last_event
    ring.extend_json((data for _, data in rows), compact=True)
    ring.set_last(last_event)
    return ring


def read_older(
    conn: sqlite3.Connection, last_event: int, after: int, upto: int, limit: int
) -> tuple[int, list[bytes]]:
    """client.events.OlderEvents over the table: (the highest index no longer kept, up to
    `limit` events after `after` up to `upto`, as their JSON)."""
    first = conn.execute("SELECT MIN(idx) FROM events").fetchone()[0]
    rows = conn.execute(
        "SELECT data FROM events WHERE idx > ? AND idx <= ? ORDER BY idx LIMIT ?",
        (after, upto, limit),
    ).fetchall()
    return (first - 1 if first is not None else last_event), [r[0] for r in rows]
