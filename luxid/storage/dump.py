"""The whole job store as one value, read from and written to any store through its own
code (docs/contracts.md#backups-and-store-copy): what `backup` and `lw store copy` move.

A `JobsDump` holds every stored job (archived ones too, with their logs), the highest job
id allocated and the queue's settings (the drain flag).  It is read

- from a local SQLite store with the online backup API (`backup_sqlite`: a copy at one
  transaction, taken while luxid writes) or through the seam (`read_store`, for a store
  no daemon serves);
- from etcd at one revision (`read_etcd`), while no transaction of the master is half
  committed (the caller holds the store's writer, `EtcdJobStore.paused`, when it serves);

and written into an empty store through the seam (`write_store`): the jobs inserted in id
order, the archived ones archived, the audit entries with their seqs, the settings set
and the id counter raised to the dump's, so the next job id continues.  Events are not
carried: they tell of changes, and a store starts its own.
"""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from msgspec.structs import replace

from client._server.etcd.audit import EtcdAudit
from client._server.etcd.client import EtcdClient
from client._server.etcd.wire import KeyValue, prefix_end
from client.audit import RETENTION_COUNT, AuditEntry, Query
from client.backup import copy_sqlite
from luxid.jobs.model import Job
from luxid.storage.base import JobStore
from luxid.storage.etcd_keys import JobKeys, decode_job, decode_log
from luxid.storage.jobdata import attach_logs
from luxid.storage.sqlite import SqliteJobStore

QUEUE_META: Final = ("drained",)
"""The queue's durable settings a copy carries (luxid.queue's drain flag)."""
PAGE: Final = 1000
CHUNK: Final = 500  # jobs per write transaction of a copy
AUDIT_CHUNK: Final = 100  # audit entries per write transaction of a copy (keys, on etcd)


@dataclass
class JobsDump:
    """A job store's content: every job by id, the id counter, the queue's settings, and
    the audit log (its entries keep their seqs)."""

    last_job_id: int
    jobs: list[Job] = field(default_factory=list)
    meta: dict[str, int] = field(default_factory=dict)
    audit: list[AuditEntry] = field(default_factory=list)


def backup_sqlite(source: Path, target: Path) -> int:
    """Copy the job store at `source` to `target` while luxid writes it
    (client.backup.copy_sqlite: one commit's content, durably).  Blocking: run it off the
    event loop.  The copy's highest allocated job id."""
    copy_sqlite(source, target)
    copy = sqlite3.connect(target)
    try:
        row = copy.execute("SELECT value FROM meta WHERE key = 'last_job_id'").fetchone()
    finally:
        copy.close()
    return int(row[0]) if row else 0


def read_store(store: JobStore) -> JobsDump:
    """Everything in a store no daemon writes to, through the seam."""
    last = store.last_job_id
    jobs: list[Job] = []
    for start in range(1, last + 1, CHUNK):
        found = store.load_jobs(range(start, min(start + CHUNK, last + 1)))
        jobs += [found[i] for i in sorted(found)]
    audit = store.query_audit(Query(limit=RETENTION_COUNT))
    return JobsDump(last, jobs, {key: store.meta(key) for key in QUEUE_META}, audit)


async def read_etcd(client: EtcdClient, keys: JobKeys) -> JobsDump:
    """Everything under `keys`' prefix, read at one revision, and luxid's audit log."""
    first = await client.range(keys.root, range_end=prefix_end(keys.root), limit=1)
    revision = first.header.revision
    logs: dict[int, list[KeyValue]] = {}
    async for kv in _scan(client, keys.log_prefix, revision):
        logs.setdefault(keys.id_of(kv.key, keys.log_prefix), []).append(kv)
    jobs: dict[int, Job] = {}
    async for kv in _scan(client, keys.live_prefix, revision):
        job_id = keys.id_of(kv.key, keys.live_prefix)
        stored = [decode_log(x.key, x.value) for x in logs.get(job_id, ())]
        jobs[job_id] = attach_logs(
            decode_job(kv.key, kv.value), ((s.op_index, s.entry) for s in stored)
        )
    async for kv in _scan(client, keys.archive_prefix, revision):
        jobs[keys.id_of(kv.key, keys.archive_prefix)] = decode_job(kv.key, kv.value)
    meta = {}
    for key in QUEUE_META:
        for kv in (await client.range(keys.meta(key), revision=revision)).kvs:
            meta[key] = int(kv.value)
    last = 0
    for kv in (await client.range(keys.next_id, revision=revision)).kvs:
        last = int(kv.value)
    audit = await EtcdAudit(client, keys.prefix, "luxid").every()
    return JobsDump(last, [jobs[i] for i in sorted(jobs)], meta, audit)


async def _scan(client: EtcdClient, prefix: bytes, revision: int) -> AsyncIterator[KeyValue]:
    """Every key under `prefix` at `revision`, in key order, page by page."""
    start, end = prefix, prefix_end(prefix)
    while True:
        answer = await client.range(start, range_end=end, limit=PAGE, revision=revision)
        for kv in answer.kvs:
            yield kv
        if not answer.more or not answer.kvs:
            return
        start = answer.kvs[-1].key + b"\0"


def write_store(dump: JobsDump, store: JobStore) -> None:
    """Write `dump` into an empty store: jobs by id (archived ones archived again), the
    settings, and the id counter at the dump's, in transactions of `CHUNK` jobs."""
    for start in range(0, len(dump.jobs), CHUNK):
        chunk = dump.jobs[start : start + CHUNK]
        with store.transaction() as tx:
            tx.insert(replace(job, archived=False) if job.archived else job for job in chunk)
            tx.archive([job.id for job in chunk if job.archived])
    for start in range(0, len(dump.audit), AUDIT_CHUNK):
        with store.transaction() as tx:
            tx.append_audit(dump.audit[start : start + AUDIT_CHUNK])
    with store.transaction() as tx:
        for key, value in dump.meta.items():
            tx.set_meta(key, value)
        tx.reserve_ids(dump.last_job_id)


def write_sqlite(dump: JobsDump, path: Path) -> None:
    """Write `dump` as a new SQLite job store at `path` (which must not exist)."""
    store = SqliteJobStore.open(path)
    try:
        write_store(dump, store)
    finally:
        store.close()
