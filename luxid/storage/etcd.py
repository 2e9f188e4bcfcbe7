"""luxid's job store on etcd (docs/contracts.md#replicated-control-plane):
luxid.storage.base's seam over fenced transactions.

The layout and the mapping are luxid.storage.etcd_keys's (client/_server/etcd/LAYOUT.md).
Every transaction of the seam becomes `FencedWriter.commit_many` (group commit: the batch
goes in as few etcd transactions as etcd's limits allow), fenced by the leader key's
create revision, so a deposed master writes nothing.  A block ends only once etcd has
committed (a quorum has it): durable before return, as the seam promises.

The opcode-running gate: the write that first shows an opcode executing (`exec_ts` set)
also creates `gate/<job>/<op>`, on condition that it does not exist yet.  luxid answers
the job process's `running` report only after that commit, so an opcode runs at most once
across all masters; a failed condition fails that write alone (AlreadyExists).

Events (docs/contracts.md#events) are keys of their own, one change each right after the
changes of the same write (one etcd transaction with them unless etcd's limits split the
batch); their indexes come from the revision etcd gave the write (etcd_keys.event_indexes),
so they only grow and never repeat across masters.  Pruning deletes the oldest keys in a
later transaction, with `meta/events_pruned` (the highest index dropped) beside it.

The store's calls are blocking, like SQLite's (group commit runs them on its worker
thread; a read of an archived job runs on luxid's event loop), while the etcd client is
asyncio: the store runs its own event loop on a thread of its own and waits for it.  It
keeps the live jobs (the same frozen Job values luxid holds, so no second copy) and the
gates in memory; archived jobs are read from etcd when asked for.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Coroutine, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final, TypeVar

import msgspec

from client import errors
from client._server.etcd.audit import EtcdAudit
from client._server.etcd.batching import Change
from client._server.etcd.client import EtcdClient
from client._server.etcd.errors import CompareFailed, Fenced, OutcomeUnknown
from client._server.etcd.fencing import FencedWriter
from client._server.etcd.release import lost_data
from client._server.etcd.url import EtcdStoreUrl
from client._server.etcd.wire import KeyValue, RequestOp, op_delete, op_put, prefix_end
from client._server.write_placement import SyncMode
from client.api.common import Event
from client.audit import AuditEntry, Query, number_entries
from client.events import EventRing, Retention
from luxid.jobs.model import FINALIZED, Job, job_status
from luxid.storage.dump import JobsDump, read_etcd
from luxid.storage.etcd_keys import (
    Gate,
    JobKeys,
    archive_change,
    decode_event,
    decode_job,
    decode_log,
    event_change,
    event_indexes,
    job_change,
    started_ops,
)
from luxid.storage.jobdata import age_ts, attach_logs

T = TypeVar("T")
_PRUNE_AT_LEAST = 1000  # events pruned at once (fewer: wait; a delete per write costs)
PAGE = 1000  # keys per range read at load (10,000 jobs exceed one answer comfortably)


class IoLoop:
    """An event loop on its own thread, for blocking callers of asyncio code."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run(self, work: Coroutine[Any, Any, T]) -> T:
        """Run `work` on the loop and wait for its result (never call from the loop)."""
        return asyncio.run_coroutine_threadsafe(work, self.loop).result()

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5.0)
        if not self._thread.is_alive():
            self.loop.close()


AUDIT_PUTS: Final = 64
"""Audit entries put by one change (one etcd transaction carries about twice as many
operations; submit_many_jobs records one entry per member)."""


class EtcdTransaction:
    """One open write transaction; its changes are sent when the `with` block ends."""

    def __init__(self, store: EtcdJobStore) -> None:
        self._store = store
        self.last_id = store._last_id
        self.changes: list[Change] = []
        self.ids_at: list[int] = []  # last_id after each change (the next_id trailer)
        self.jobs: dict[int, Job] = {}
        self.logged: dict[int, int] = {}
        self.gates: set[tuple[int, int]] = set()
        self.archived: set[int] = set()
        self.meta: dict[str, int] = {}
        self.event_seq = store._event_seq
        self.audit_seq = store._audit_seq
        self.drafts: list[tuple[int, bytes, Event]] = []  # (change position, key, draft)
        self.pruned = 0  # how many of the store's kept event keys this write deletes
        self.events: list[Event] = []  # numbered, once committed

    def append_events(self, drafts: Iterable[Event]) -> None:
        """Store events, one key each; numbered from the write's revision at commit."""
        store = self._store
        for draft in drafts:
            if not self.drafts:
                self._prune_events()
            self.event_seq += 1
            key = store.keys.event(store.token, self.event_seq)
            self.drafts.append((len(self.changes), key, draft))
            self._add(event_change(store.keys, store.token, self.event_seq, draft))

    def _prune_events(self) -> None:
        """Delete the oldest events the retention lets go (with this transaction), once
        there are enough of them to be worth a delete."""
        store = self._store
        kept, retention = store._event_keys, store.retention
        if not kept:
            return
        newest_ts = kept[-1][2]
        drop = 0
        while drop < len(kept) and retention.drops_at(kept[drop][2], newest_ts, len(kept) - drop):
            drop += 1
        if drop < max(1, min(_PRUNE_AT_LEAST, retention.keep)):
            return
        index, key, _ = kept[drop - 1]
        delete = op_delete(store.keys.events_prefix, range_end=key + b"\0")
        self._add(Change((delete, op_put(store.keys.meta("events_pruned"), str(index)))))
        self.meta["events_pruned"] = index
        self.pruned = drop

    def append_audit(self, entries: Iterable[AuditEntry]) -> None:
        """Store audit entries, one key each (client.audit.number_entries)."""
        numbered = number_entries(entries, self.audit_seq)
        if numbered:
            self.audit_seq = max([self.audit_seq, *(e.seq for e in numbered)])
        for start in range(0, len(numbered), AUDIT_PUTS):  # each change fits a transaction
            chunk = numbered[start : start + AUDIT_PUTS]
            self._add(Change(tuple(self._store.audit.put_ops(chunk))))

    def insert(self, jobs: Iterable[Job]) -> None:
        """Store new jobs; each id above every id ever inserted (AlreadyExists else)."""
        for job in jobs:
            if job.id <= self.last_id:
                raise errors.AlreadyExists(
                    f"job id {job.id} is not above the last one allocated ({self.last_id})"
                )
            self.last_id = job.id
            self._put(job, 0)

    def update(self, jobs: Iterable[Job]) -> None:
        """Store the new state of live jobs (NotFound if one is not live)."""
        for job in jobs:
            if job.id in self.archived or self._current(job.id) is None:
                raise errors.NotFound(f"job {job.id} is not in the store")
            logged = self.logged.get(job.id, self._store._logged.get(job.id, 0))
            self._put(job, logged)

    def archive(self, ids: Iterable[int]) -> list[int]:
        """Archive finalized live jobs; returns the ids actually archived."""
        done = []
        for job_id in ids:
            job = self._current(job_id)
            if job is None or job_id in self.archived or job_status(job) not in FINALIZED:
                continue
            self._add(archive_change(self._store.keys, job))
            self.archived.add(job_id)
            done.append(job_id)
        return done

    def set_meta(self, key: str, value: int) -> None:
        """Store a small durable setting of the queue (e.g. the drain flag)."""
        self._add(Change((op_put(self._store.keys.meta(key), str(int(value))),)))
        self.meta[key] = int(value)

    def reserve_ids(self, last_id: int) -> None:
        """Count every id up to `last_id` as allocated (never lowers the counter): a
        change of no keys of its own, whose transaction's trailer puts `next_id`."""
        if last_id > self.last_id:
            self.last_id = last_id
            self._add(Change(()))

    def _current(self, job_id: int) -> Job | None:
        return self.jobs.get(job_id) or self._store._jobs.get(job_id)

    def _put(self, job: Job, logged: int) -> None:
        store = self._store
        new_gates = [
            i
            for i in started_ops(job)
            if (job.id, i) not in store._gates and (job.id, i) not in self.gates
        ]
        gate = Gate(node=store.node, term=store.token, started=time.time())
        self._add(job_change(store.keys, job, logged, new_gates, gate))
        self.jobs[job.id] = job
        self.logged[job.id] = max(logged, job.log_serial)
        self.gates.update((job.id, i) for i in new_gates)

    def _add(self, change: Change) -> None:
        self.changes.append(change)
        self.ids_at.append(self.last_id)


class EtcdJobStore:
    """Jobs under `<prefix>/jobs/` for the master of term `token` (see the module doc).

    `on_lost(error)` is called (from the writing thread) when a write finds this node
    deposed (`Fenced`) or its outcome unknown (`OutcomeUnknown`): luxid then stops serving
    this term; the next term loads the state from etcd again.
    """

    sync_mode: SyncMode = "thread"  # every commit is a network round trip: off the loop

    def __init__(
        self,
        url: EtcdStoreUrl,
        node: str,
        token: int,
        *,
        timeout: float = 5.0,
        on_lost: Callable[[errors.StorageError], None] | None = None,
    ) -> None:
        self.keys = JobKeys(url.prefix)
        self.node = node
        self.token = token
        self.on_lost = on_lost
        self._io = IoLoop(f"luxid-etcd-{node}")
        self.client = EtcdClient(url.endpoints, timeout=timeout, security=url.security)
        leader_key = f"{url.prefix.rstrip('/')}/leader".encode()
        self._writer = FencedWriter(self.client, leader_key, token, name="luxid")
        self._lock = threading.RLock()  # memory changes against reads on other threads
        self._write = threading.Lock()  # one transaction at a time
        self._last_id = 0
        self._jobs: dict[int, Job] = {}
        self._logged: dict[int, int] = {}
        self._gates: set[tuple[int, int]] = set()
        self._meta: dict[str, int] = {}
        self.previous_master: str | None = None
        self.retention = Retention()
        self.audit = EtcdAudit(self.client, url.prefix, "luxid")
        self._audit_seq = 0  # the last audit entry's seq
        self._event_seq = 0  # the last seq of this term's event keys
        self._event_keys: list[tuple[int, bytes, float]] = []  # kept: (index, key, ts)
        self._events: list[Event] = []  # kept, as loaded

    @classmethod
    def open(
        cls,
        url: EtcdStoreUrl,
        node: str,
        token: int,
        *,
        timeout: float = 5.0,
        on_lost: Callable[[errors.StorageError], None] | None = None,
        known_last_id: int = 0,
    ) -> EtcdJobStore:
        """Connect and load the state at one revision (StorageError if etcd cannot, or if
        it answers with fewer job ids than `known_last_id`, the highest this node already
        saw committed: the member answering lost data, and serving that would hand out
        job ids again)."""
        store = cls(url, node, token, timeout=timeout, on_lost=on_lost)
        try:
            store._io.run(store._load())
            if store._last_id < known_last_id:
                raise lost_data(
                    url.prefix, f"job ids up to {store._last_id}", f"job {known_last_id}"
                )
        except BaseException:
            store.close()
            raise
        return store

    async def _load(self) -> None:
        keys = self.keys
        first = await self.client.range(keys.root, range_end=prefix_end(keys.root), limit=1)
        revision = first.header.revision
        logs: dict[int, list[KeyValue]] = {}
        async for kv in self._scan(keys.log_prefix, revision):
            logs.setdefault(keys.id_of(kv.key, keys.log_prefix), []).append(kv)
        async for kv in self._scan(keys.live_prefix, revision):
            job_id = keys.id_of(kv.key, keys.live_prefix)
            stored = [decode_log(x.key, x.value) for x in logs.get(job_id, ())]
            job = attach_logs(decode_job(kv.key, kv.value), ((s.op_index, s.entry) for s in stored))
            self._jobs[job_id] = job
            self._logged[job_id] = job.log_serial
        async for kv in self._scan(keys.gate_prefix, revision):
            self._gates.add(keys.gate_of(kv.key))
        async for kv in self._scan(keys.meta_prefix, revision):
            name = kv.key[len(keys.meta_prefix) :].decode()
            self._meta[name] = int(kv.value)
        for kv in (await self.client.range(keys.next_id, revision=revision)).kvs:
            self._last_id = int(kv.value)
        for kv in (await self.client.range(keys.master, revision=revision)).kvs:
            self.previous_master = kv.value.decode(errors="replace")
        self._audit_seq = await self.audit.last_seq()
        event_kvs: list[KeyValue] = [e async for e in self._scan(keys.events_prefix, revision)]
        indexes = event_indexes(e.mod_revision for e in event_kvs)
        mine = keys.events_prefix + b"%020d/" % self.token
        for ekv, index in zip(event_kvs, indexes, strict=True):
            event = msgspec.structs.replace(decode_event(ekv.key, ekv.value), index=index)
            self._events.append(event)
            self._event_keys.append((index, ekv.key, event.ts))
            if ekv.key.startswith(mine):
                self._event_seq = max(self._event_seq, int(ekv.key[len(mine) :]))

    async def _scan(self, prefix: bytes, revision: int) -> Any:
        """Every key under `prefix` at `revision`, in key order, page by page."""
        start, end = prefix, prefix_end(prefix)
        while True:
            answer = await self.client.range(start, range_end=end, limit=PAGE, revision=revision)
            for kv in answer.kvs:
                yield kv
            if not answer.more or not answer.kvs:
                return
            start = answer.kvs[-1].key + b"\0"

    def close(self) -> None:
        """Close the connections and the store's thread."""
        try:
            self._io.run(self.client.close())
        finally:
            self._io.close()

    # --------------------------------------------------------------- writes

    @contextmanager
    def transaction(self) -> Iterator[EtcdTransaction]:
        """A write transaction committed in etcd when the block ends (nothing sent if the
        block raises).  A storage failure raises StorageError; a gate that exists already
        (an opcode started before) raises AlreadyExists; memory changes only on success."""
        with self._write:
            tx = EtcdTransaction(self)
            yield tx
            if tx.changes:
                revisions = self._commit(tx.changes, tx.ids_at)
                self._number(tx, revisions)
            with self._lock:
                self._audit_seq = tx.audit_seq
                self._last_id = tx.last_id
                self._jobs.update(tx.jobs)
                self._logged.update(tx.logged)
                self._gates.update(tx.gates)
                self._meta.update(tx.meta)
                for job_id in tx.archived:
                    self._jobs.pop(job_id, None)
                    self._logged.pop(job_id, None)
                    self._gates.difference_update({g for g in self._gates if g[0] == job_id})

    def query_audit(self, query: Query) -> list[AuditEntry]:
        """The audit entries `query` asks for, newest last (read from etcd)."""
        return self._io.run(self.audit.query(query))

    def prune_audit(self, now: float, days: float) -> int:
        """Drop the audit entries retention no longer keeps."""
        return self._io.run(self.audit.prune(days))

    def dump(self) -> JobsDump:
        """Everything under the prefix, read at one revision between two of this store's
        transactions (none commits meanwhile): a consistent online backup."""
        with self._write:
            return self._io.run(read_etcd(self.client, self.keys))

    def _number(self, tx: EtcdTransaction, revisions: list[int]) -> None:
        """Number the committed events from their writes' revisions; keep their keys."""
        indexes = event_indexes(revisions[position] for position, _, _ in tx.drafts)
        tx.events = [
            msgspec.structs.replace(draft, index=index)
            for (_, _, draft), index in zip(tx.drafts, indexes, strict=True)
        ]
        self._event_seq = tx.event_seq
        del self._event_keys[: tx.pruned]
        self._event_keys += [
            (event.index, key, event.ts)
            for event, (_, key, _) in zip(tx.events, tx.drafts, strict=True)
        ]

    def load_events(self, retention: Retention) -> EventRing:
        """The kept events as a ring under `retention` (which later writes prune by)."""
        self.retention = retention
        pruned = self._meta.get("events_pruned", 0)
        ring = EventRing(retention, pruned=pruned)
        ring.extend(self._events)
        ring.set_last(pruned)
        self._events = []  # the ring holds them now
        return ring

    def _commit(self, changes: list[Change], ids_at: list[int]) -> list[int]:
        """Commit the changes; each change's revision."""
        next_id = self.keys.next_id

        def trailer(index: int) -> RequestOp:
            return op_put(next_id, str(ids_at[index]))

        try:
            outcomes = self._io.run(self._writer.commit_many(changes, trailer=trailer))
        except (Fenced, OutcomeUnknown) as exc:
            if self.on_lost is not None:
                self.on_lost(exc)
            raise
        revisions = [outcome for outcome in outcomes if not isinstance(outcome, CompareFailed)]
        if len(revisions) < len(outcomes):
            raise errors.AlreadyExists(
                "an opcode of this write has already started on a master before (its "
                "running gate exists in etcd); it is never started twice"
            )
        return revisions

    def claim(self, jobs: Iterable[Job], events: Iterable[Event] = ()) -> None:
        """Record this node as the one whose luxid serves, with the jobs a takeover changed
        and their events, in one transaction (luxid.takeover decides them); the events are
        kept for `load_events`."""
        with self.transaction() as tx:
            tx.update(jobs)
            tx.append_events(events)
            tx.changes.append(Change((op_put(self.keys.master, self.node),)))
            tx.ids_at.append(tx.last_id)
        self._events += tx.events
        self.previous_master = self.node

    def auto_archive(self, older_than: float, limit: int) -> tuple[list[int], int]:
        """Archive up to `limit` finalized jobs that ended before `older_than`, oldest ids
        first, in one transaction; (archived ids, how many such jobs remain)."""
        with self._lock:
            due = sorted(
                job_id
                for job_id, job in self._jobs.items()
                if (ts := age_ts(job)) is not None and ts < older_than
            )
        with self.transaction() as tx:
            done = tx.archive(due[: max(0, limit)])
        return done, len(due) - len(done)

    # ---------------------------------------------------------------- reads

    @property
    def last_job_id(self) -> int:
        """The highest job id ever inserted (committed)."""
        return self._last_id

    def gates(self) -> set[tuple[int, int]]:
        """(job id, opcode index) of every opcode that started, on any master."""
        with self._lock:
            return set(self._gates)

    def meta(self, key: str, default: int = 0) -> int:
        """A setting stored with `EtcdTransaction.set_meta`, or `default`."""
        return self._meta.get(key, default)

    def load_live(self) -> list[Job]:
        """Every non-archived job, by id, with its log entries."""
        with self._lock:
            return [self._jobs[i] for i in sorted(self._jobs)]

    def load_jobs(self, ids: Iterable[int]) -> dict[int, Job]:
        """The stored jobs (archived or not) among `ids`; unknown ids are left out."""
        out: dict[int, Job] = {}
        missing = []
        with self._lock:
            for job_id in {int(i) for i in ids}:
                job = self._jobs.get(job_id)
                if job is not None:
                    out[job_id] = job
                elif 0 < job_id <= self._last_id:
                    missing.append(job_id)
        for job_id in sorted(missing):
            key = self.keys.archive(job_id)
            kv = self._io.run(self.client.get(key))
            if kv is not None:
                out[job_id] = decode_job(key, kv.value)
        return out

    def load_job(self, job_id: int) -> Job | None:
        """One stored job (archived or not), or None."""
        return self.load_jobs([job_id]).get(job_id)

    def status_of(self, job_id: int) -> str | None:
        """The stored status of one job (archived included), None if unknown."""
        job = self.load_job(job_id)
        return None if job is None else job_status(job)
