"""The daemons' audit files (docs/contracts.md#audit-log): `AuditDb`, a file of entries of
its own (`audit.sqlite` in a state directory), and whole-file reads, copies and writes
(backups, store copies).  The table itself is client.audit_table's.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from client.audit import AuditEntry, Query
from client.audit_table import create, decode_entry, insert, last_seq, prune, select
from client.backup import replace_durably


def select_file(path: Path, query: Query) -> list[AuditEntry]:
    """`select` on a connection of its own (read only; WAL lets it read beside the
    writer): for a thread other than the writer's."""
    db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return select(db, query)
    finally:
        db.close()


def read_file(path: Path) -> list[AuditEntry]:
    """Every entry of an audit file, oldest first (none when the file does not exist)."""
    if not path.exists():
        return []
    db = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return [
            decode_entry(blob) for (blob,) in db.execute("SELECT entry FROM audit ORDER BY seq")
        ]
    finally:
        db.close()


def write_file(path: Path, entries: Iterable[AuditEntry]) -> None:
    """A new audit file at `path` holding `entries` (numbered), written durably under a
    temporary name and then renamed (a backup's, a copy's)."""
    tmp = path.with_name(path.name + ".tmp")
    tmp.unlink(missing_ok=True)
    db = sqlite3.connect(tmp)
    try:
        create(db)
        with db:
            insert(db, entries)
    finally:
        db.close()
    replace_durably(tmp, path)


COMMIT_EVERY: Final = 256
"""A copy file (`durable=False`) commits its inserts after this many entries at the latest."""


class AuditDb:
    """A file holding only audit entries (`audit.sqlite` in a daemon's state directory).

    `durable=True`: every insert is committed and synced (the file is where entries are
    durable).  `durable=False`: the entries are durable elsewhere first (wconfd's journal,
    which a start replays into the file), so they wait in memory and go into the file in
    one statement and commit at `commit` (before every read on another connection, copy
    and `sync`) or at COMMIT_EVERY entries: a commit per audited write cost wconfd a sixth
    of its update_object/s, and a statement per write still a tenth.  Its commits are not
    synced; `sync()` makes them durable before the journal's copy is dropped, and may run
    on another thread while this connection goes on inserting."""

    def __init__(self, path: Path, *, durable: bool = True) -> None:
        self.path = path
        self.durable = durable
        self.db = sqlite3.connect(path, check_same_thread=False)
        self.db.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL syncs only at checkpoints (see `sync`), FULL at every commit.
        self.db.execute(f"PRAGMA synchronous={'FULL' if durable else 'NORMAL'}")
        create(self.db)
        self.db.commit()
        self._pending: list[AuditEntry] = []  # inserted at the next commit

    def insert(self, entries: Iterable[AuditEntry]) -> None:
        """Add numbered entries (replays are left as they are); committed at once in a
        durable file, else within COMMIT_EVERY entries or at the next `commit`."""
        self._pending += entries
        if self.durable or len(self._pending) >= COMMIT_EVERY:
            self.commit()

    def commit(self) -> None:
        """Write and commit the entries added so far: other connections see them from now
        on."""
        if self._pending:
            insert(self.db, self._pending)
            self._pending = []
        self.db.commit()

    def select(self, query: Query) -> list[AuditEntry]:
        """The entries `query` asks for, newest last."""
        self.commit()
        return select(self.db, query)

    def last_seq(self) -> int:
        """The highest seq in the file (0: none)."""
        self.commit()
        return last_seq(self.db)

    def prune(self, now: float, days: float, count: int) -> int:
        """Apply retention; how many entries were dropped."""
        self.commit()
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
        """Commit what waits and close the file."""
        try:
            self.commit()
        finally:
            self.db.close()
