"""wconfd's `backup` (docs/contracts.md#backups-and-store-copy): the durable state as of
one configuration serial, written as a snapshot file in the local store's own format.

The state in memory is exactly what is durable (records are applied only once on disk or
committed in etcd), and the event loop is the only thread that changes it, so encoding
it in one loop step takes it at one serial, on local files and on etcd alike.  The file
is `wconfd.snapshot.json` (wconfd.storage.snapshot), so the backup's part is itself a
state directory wconfd can start from, and `lw store copy` reads it with the store's
own code.  The audit log goes beside it as `audit.sqlite` (wconfd.audit_log), every entry
durable when the backup starts.
"""

from __future__ import annotations

import asyncio
import sqlite3
from collections.abc import Callable
from pathlib import Path

from client._server import backups
from client.api.common import BackupPart
from client.errors import StorageError
from wconfd.audit_log import AUDIT_FILE, WconfdAudit
from wconfd.durable_state import DurableState
from wconfd.storage.fileops import FileOps
from wconfd.storage.snapshot import encode_snapshot, write_atomic

NAME = "wconfd"
SNAPSHOT_FILE = f"{NAME}.snapshot.json"


def write_snapshot(folder: Path, state_json: bytes) -> None:
    """Write `state_json` (a Snapshot's JSON) as `folder`'s wconfd snapshot, seq 0: the
    state directory of a store holding that state and no journal."""
    write_atomic(str(folder / SNAPSHOT_FILE), encode_snapshot(NAME, 0, state_json), FileOps())


class Backups:
    """Implements `backup` (client.api.common) over the serving state (`state()`, read per call: a
    new term installs a new one) into `<state_dir>/backups/`."""

    def __init__(
        self,
        state_dir: Path,
        state: Callable[[], DurableState],
        audit: Callable[[], WconfdAudit | None],
    ) -> None:
        self.state_dir = state_dir
        self.state = state
        self.audit = audit

    async def backup(self, client: object, dir: str) -> BackupPart:
        state = self.state()
        body = state.snapshot_json()  # one loop step: one serial
        serial = state.config.serial_no
        book = self.audit()
        files = [SNAPSHOT_FILE]
        try:
            folder = await asyncio.to_thread(self._write, dir, body)
            if book is not None:
                await book.export(folder / AUDIT_FILE)
                files.append(AUDIT_FILE)
            hashes = await asyncio.to_thread(backups.hashes, folder, files)
        except (OSError, sqlite3.Error) as exc:
            raise StorageError(f"cannot write the backup: {exc}") from None
        return BackupPart(path=str(folder), files=hashes, serial=serial)

    def _write(self, dir: str, body: bytes) -> Path:
        folder = backups.prepare(self.state_dir, dir)
        write_snapshot(folder, body)
        return folder
