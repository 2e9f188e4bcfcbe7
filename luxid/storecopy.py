"""`python -m luxid.storecopy`: luxid's part of `lw store copy`
(docs/operations.md#moving-to-three-machines), read and written with luxid's own storage
code.

The part is a SQLite job store (`jobs.sqlite`, as in a backup): every job with its status,
log and id, the id counter and the queue's drain flag.  Exported from a stopped state
directory with SQLite's backup API (read-only), or from etcd at one revision
(luxid.storage.dump); imported into a state directory as its job store file, or onto etcd
through the etcd job store, fenced under the leader key the copy holds, so the next job
id continues above the copied ones.  (The audit log, once it exists, is one more table
or file of the part.)

`lw store copy` runs it (client.cli.backup); the steps are those of
client._server.storetarget.run_tool.
"""

from __future__ import annotations

import asyncio
import shutil
import sys
import tempfile
from pathlib import Path

from client._server.etcd.url import EtcdStoreUrl
from client._server.storetarget import (
    COPY_NODE,
    Refused,
    Target,
    etcd_client,
    hold_locally,
    hold_on_etcd,
    run_tool,
)
from client.backup import copy_atomic
from luxid.storage.dump import (
    JobsDump,
    backup_sqlite,
    read_etcd,
    read_store,
    write_sqlite,
    write_store,
)
from luxid.storage.etcd import EtcdJobStore
from luxid.storage.etcd_keys import JobKeys
from luxid.storage.sqlite import DB_FILENAME, SqliteJobStore

NAME = "luxid"


def export(src: Target, folder: Path) -> dict[str, int]:
    """Write the stopped SRC's jobs as the part's job store; {"last_job_id": N}."""
    target = folder / DB_FILENAME
    if src.path is not None:
        db = src.path / DB_FILENAME
        if not db.exists():  # luxid never ran there: no jobs
            write_sqlite(JobsDump(0), target)
            return {"last_job_id": 0}
        return {"last_job_id": backup_sqlite(db, target)}
    url = src.url
    assert url is not None

    async def read() -> JobsDump:
        async with etcd_client(url) as client:
            return await read_etcd(client, JobKeys(url.prefix))

    dump = asyncio.run(read())
    write_sqlite(dump, target)
    return {"last_job_id": dump.last_job_id}


def write(folder: Path, dst: Target) -> None:
    """Write the part's job store into DST (checked, and empty, by the caller)."""
    db = folder / DB_FILENAME
    if not db.is_file():
        raise Refused(f"{NAME}/{DB_FILENAME}: missing from the backup")
    if dst.path is not None:
        with hold_locally(dst.path, NAME):
            copy_atomic(db, dst.path / DB_FILENAME)
        return
    assert dst.url is not None
    asyncio.run(_write_etcd(_read_part(db), dst.url))


def _read_part(db: Path) -> JobsDump:
    """The part's jobs, read through the store from a copy of its file (opening a store
    may change its file; the part stays as hashed)."""
    with tempfile.TemporaryDirectory(prefix="lw-store-copy-") as tmp:
        copy = Path(tmp) / DB_FILENAME
        shutil.copyfile(db, copy)
        store = SqliteJobStore.open(copy)
        try:
            return read_store(store)
        finally:
            store.close()


async def _write_etcd(dump: JobsDump, url: EtcdStoreUrl) -> None:
    """The jobs through the etcd job store, fenced by the leader key the copy holds."""
    async with etcd_client(url) as client, hold_on_etcd(client, url) as token:
        store = EtcdJobStore(url, COPY_NODE, token)
        try:
            await asyncio.to_thread(write_store, dump, store)
        finally:
            store.close()


def main(argv: list[str] | None = None) -> int:
    """Run one step of luxid's part of a copy (see the module docstring)."""
    return run_tool("python -m luxid.storecopy", argv, export, write)


if __name__ == "__main__":
    sys.exit(main())
