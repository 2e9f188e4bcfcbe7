"""wconfd's audit log (docs/contracts.md#audit-log): its entries are journal records
(`AuditNote`), so an audited change and its entry are durable in one write, and a failed
call's entry costs one group-committed record.

On local files the journal is compacted at every snapshot, so the entries are also kept
in `audit.sqlite` beside it: inserted once durable (committed in groups, before any read
of the file, and with no sync of their own) and synced before a snapshot drops their
records; a start replays the journal's notes into it, so a crash in between loses
nothing.  On etcd the notes are keys under the prefix (`audit/wconfd/`), put in the same
transaction as the change, and read from etcd.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Final, Protocol

import msgspec

from client._server.audit_sql import AuditDb, select_file, write_file
from client._server.etcd.audit import EtcdAudit
from client.audit import RETENTION_COUNT, AuditEntry, Query, object_target
from client.backup import copy_sqlite
from wconfd.config import ConfigChange, ConfigState, ReservationChange
from wconfd.config.objects import ConfigObject
from wconfd.config.records import RECORD_KIND, RemoveObject
from wconfd.durable_state import AuditNote

log = logging.getLogger(__name__)

AUDIT_FILE: Final = "audit.sqlite"
PRUNE_EVERY: Final = 10_000
"""Retention is applied after this many entries (and at start)."""


def change_facts(config: ConfigState, record: ConfigChange) -> tuple[str, list[int | None]]:
    """An object write's target (the object's lock name; `kind/uuid` for objects without
    a name) and its serial `[before, after]` (`[null, 1]` for an add, `[n, null]` for a
    remove), from the config before `record` applies."""
    if isinstance(record, RemoveObject):
        kind: str = record.kind
        old: ConfigObject | None = config.find(record.kind, record.uuid)
        new: ConfigObject | None = None
    else:
        kind = RECORD_KIND[type(record)]
        new = record.obj
        old = config.cluster if kind == "cluster" else config.find(kind, new.uuid)
    shown = new if new is not None else old
    name = str(getattr(shown, "name", None) or getattr(shown, "uuid", "?"))
    before = None if old is None else old.serial_no
    after = None if new is None else new.serial_no
    return object_target(kind, name), [before, after]


class AuditReader(Protocol):
    """Where the entries are read from (the local file, or etcd)."""

    def query(self, query: Query) -> Awaitable[list[AuditEntry]]: ...

    def export(self, target: Path) -> Awaitable[None]:
        """Write every entry to a new audit file (a backup's)."""
        ...


class WconfdAudit:
    """wconfd's AuditBook: numbers entries, journals them through `commit` (a standalone
    entry) or with a change (`note`), keeps the local copy, answers queries."""

    def __init__(
        self,
        commit: Callable[[AuditNote], Awaitable[None]],
        reader: AuditReader,
        last_seq: int,
        db: AuditDb | None = None,
        days: float = 90.0,
    ) -> None:
        self._commit = commit
        self.reader = reader
        self.seq = last_seq
        self.db = db
        self.days = days
        self._since_prune = PRUNE_EVERY  # prune at the first entry after a start

    def note(
        self, entries: list[AuditEntry], change: ConfigChange | ReservationChange | None = None
    ) -> AuditNote:
        """`entries` numbered, as one journal record (with the change they tell of)."""
        first, self.seq = self.seq + 1, self.seq + len(entries)
        numbered = [msgspec.structs.replace(e, seq=first + i) for i, e in enumerate(entries)]
        return AuditNote(numbered, change)

    async def record(self, entries: list[AuditEntry]) -> None:
        """Journal `entries` on their own (a call whose change did not carry them)."""
        await self._commit(self.note(entries))

    def query(self, query: Query) -> Awaitable[list[AuditEntry]]:
        return self.reader.query(query)

    def export(self, target: Path) -> Awaitable[None]:
        """Write every entry to a new audit file `target` (a backup's)."""
        return self.reader.export(target)

    def durable(self, note: AuditNote) -> None:
        """A note is durable: keep it in the local file (retention now and then)."""
        if self.db is None:
            return
        self.db.insert(note.entries)
        self._since_prune += len(note.entries)
        if self._since_prune >= PRUNE_EVERY:
            self._since_prune = 0
            self.db.prune(time.time(), self.days, RETENTION_COUNT)

    async def before_compaction(self) -> None:
        """Make the local file durable: the journal records it copies are about to go."""
        if self.db is not None:
            self.db.commit()
            await asyncio.to_thread(self.db.sync)


class LocalReader:
    """Queries answered from the local file, on a connection and thread of their own, once
    the entries inserted so far are committed (they are noted durable, so a caller reads
    its own)."""

    def __init__(self, db: AuditDb) -> None:
        self.db = db

    async def query(self, query: Query) -> list[AuditEntry]:
        self.db.commit()
        return await asyncio.to_thread(select_file, self.db.path, query)

    async def export(self, target: Path) -> None:
        self.db.commit()
        await asyncio.to_thread(copy_sqlite, self.db.path, target)


class _NoEntries:
    """A standby's reader: it keeps no entries (queries go to the master)."""

    async def query(self, query: Query) -> list[AuditEntry]:
        return []

    async def export(self, target: Path) -> None:
        await asyncio.to_thread(write_file, target, [])


NO_ENTRIES: Final = _NoEntries()


async def prune_etcd(audit: EtcdAudit, days: float) -> None:
    """Apply retention to the entries on etcd once, at a term's start (a failure is
    logged: the next term tries again)."""
    try:
        gone = await audit.prune(days)
    except Exception as exc:
        log.warning("audit log on etcd: retention failed: %s", exc)
    else:
        if gone:
            log.info("audit log on etcd: dropped %d entries past retention", gone)


def open_audit_db(state_dir: Path) -> AuditDb:
    """The local file of wconfd's entries (made if missing, its directory too, as the
    store makes it)."""
    state_dir.mkdir(parents=True, exist_ok=True)
    return AuditDb(state_dir / AUDIT_FILE, durable=False)
