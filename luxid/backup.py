"""luxid's `backup` (docs/contracts.md#backups-and-store-copy): the job store as of one
transaction, written as a SQLite job store (`jobs.sqlite`, the local store's own file), so
the backup's part is itself a state directory luxid can start from.

On local files it is SQLite's online backup API (luxid.storage.dump.backup_sqlite), on
etcd a read of the whole prefix at one revision between two of the master's transactions
(EtcdJobStore.dump) written into a fresh SQLite store; either runs off the event loop.
(The audit log, once it exists, is one more table or file written here.)
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from client._server import backups
from client.api.common import BackupPart
from client.errors import StorageError
from luxid.storage.base import JobStore
from luxid.storage.dump import backup_sqlite, write_sqlite
from luxid.storage.etcd import EtcdJobStore
from luxid.storage.sqlite import DB_FILENAME, SqliteJobStore


class Backups:
    """Implements `backup` (client.api.common) for one term's store into `<state_dir>/backups/`."""

    def __init__(self, state_dir: Path, store: JobStore) -> None:
        self.state_dir = state_dir
        self.store = store

    async def backup(self, conn: object, dir: str) -> BackupPart:
        loop = asyncio.get_running_loop()
        try:
            folder, files, last = await loop.run_in_executor(None, self._write, dir)
        except OSError as exc:
            raise StorageError(f"cannot write the backup: {exc}") from None
        return BackupPart(path=str(folder), files=files, last_job_id=last)

    def _write(self, dir: str) -> tuple[Path, dict[str, str], int]:
        folder = backups.prepare(self.state_dir, dir)
        target = folder / DB_FILENAME
        store = self.store
        if isinstance(store, SqliteJobStore):
            last = backup_sqlite(store.path, target)
        elif isinstance(store, EtcdJobStore):
            dump = store.dump()
            write_sqlite(dump, target)
            last = dump.last_job_id
        else:  # pragma: no cover - every store is one of the two
            raise StorageError(f"no backup for a {type(store).__name__}")
        return folder, backups.hashes(folder, [DB_FILENAME]), last
