"""lw-rapi's own audit file (docs/contracts.md#audit-log): the entries of RAPI user and
token changes, in `rapi_audit.sqlite` beside `rapi_users` and `rapi_tokens` (not the
daemons' `audit.sqlite`: a development stack's lw-rapi shares their state directory).

Two kinds of process write it, `lw rapi-user` (an operator, often root) and lw-rapi
(`POST /2/tokens`), so an append numbers its entry inside one write transaction
(`BEGIN IMMEDIATE`: read the highest seq, insert the next) and commits it synced (WAL,
`synchronous=FULL`) before the change is reported done.  `lw audit` and lw-rapi's
`GET /2/audit` read it read-only; a missing file holds no entries.  The table is the one
the daemons keep their entries in (client.audit_table), so one format serves all.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import tempfile
import time
from pathlib import Path
from typing import Final

import msgspec

from client.audit import RETENTION_COUNT, RETENTION_DAYS, AuditEntry, Query
from client.audit_table import create, insert, last_seq, prune, select
from client.backup import fsync_dir
from client.rapi_users import owned_like_directory

AUDIT_FILE: Final = "rapi_audit.sqlite"
BUSY_SECONDS: Final = 10.0
"""How long an append waits for another writer's transaction."""


def audit_path(state_dir: Path) -> Path:
    """Where lw-rapi's audit file lives (its state directory)."""
    return state_dir / AUDIT_FILE


def rapi_entry(method: str, target: str, actor: str, now: float) -> AuditEntry:
    """An entry of this process's change to the RAPI's users or tokens (`seq` 0: `append`
    numbers it): `daemon` rapi, this process's uid and pid."""
    return AuditEntry(
        seq=0,
        ts=now,
        daemon="rapi",
        actor=actor,
        uid=os.getuid(),
        pid=os.getpid(),
        job_id=None,
        method=method,
        target=target,
        outcome="ok",
    )


def append(state_dir: Path, entry: AuditEntry) -> AuditEntry:
    """Number `entry` after the file's last and store it durably (synced before this
    returns), applying retention in the same transaction; the numbered entry.  Raises
    sqlite3.Error or OSError when the file cannot be written."""
    path = audit_path(state_dir)
    _create(path)
    db = sqlite3.connect(path, timeout=BUSY_SECONDS, isolation_level=None)
    try:
        db.execute("PRAGMA synchronous=FULL")  # in WAL mode: every commit is synced
        create(db)  # for a file an older lw made without its table; nothing otherwise
        db.execute("BEGIN IMMEDIATE")  # the write lock first: no other writer numbers alike
        try:
            entry = msgspec.structs.replace(entry, seq=last_seq(db) + 1)
            insert(db, [entry])
            prune(db, entry.ts, RETENTION_DAYS, RETENTION_COUNT)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    finally:
        db.close()
    return entry


def _create(path: Path) -> None:
    """Make the file if it is missing, whole before its name appears: in WAL mode, with its
    table, mode 0600 and (made by root) owned like its directory, so lw-rapi, its own user
    under systemd, can append too (SQLite gives the -wal and -shm files the file's owner).

    It is made under a private name and linked into place, so no writer ever switches the
    journal mode: SQLite makes that switch without waiting for other connections, so
    writers starting on a new file together failed with "database is locked".  The file
    and its directory entry are synced."""
    if path.exists():
        return
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd, draft = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)  # mode 0600
    try:
        with open(fd, "r+b") as made:
            owned_like_directory(made.fileno(), path.parent)
            with contextlib.closing(sqlite3.connect(draft, isolation_level=None)) as db:
                db.execute("PRAGMA journal_mode=WAL")
                create(db)
            os.fsync(made.fileno())
        with contextlib.suppress(FileExistsError):  # another writer made it first
            os.link(draft, path)
            fsync_dir(path.parent)
    finally:
        os.unlink(draft)


def read(state_dir: Path, query: Query) -> list[AuditEntry]:
    """The file's entries that `query` asks for, newest last ([] when there is no file).
    Raises sqlite3.Error or OSError when it cannot be read (another user's, damaged)."""
    path = audit_path(state_dir)
    if not path.exists():
        return []
    db = sqlite3.connect(f"{path.resolve().as_uri()}?mode=ro", uri=True, timeout=BUSY_SECONDS)
    try:
        return select(db, query)
    finally:
        db.close()


def record(state_dir: Path, method: str, target: str, actor: str) -> AuditEntry:
    """Append this process's change `method` of `target` for `actor`, now."""
    return append(state_dir, rapi_entry(method, target, actor, time.time()))
