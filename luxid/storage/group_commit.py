"""Group commit: luxid's one writer of the job store, on one worker thread.

A commit costs one fsync (milliseconds on many disks), so writes are never made one by
one: the event loop enqueues them (new jobs, job updates, archive and meta changes) and
awaits their result; the worker takes everything queued so far and commits it in ONE
transaction.  While a commit runs, new writes queue up for the next one, so N concurrent
submits or job reports cost one fsync, not N.  The worker decides nothing: every job it
writes was built on the event loop.

A lone writer's commit runs on the event loop itself (client._server.write_placement):
the thread hand-off would cost about as much as the fsync, and no other client waits
meanwhile.  Once batches are shared (a whole transaction each: the loop has work to do
meanwhile; wconfd's small journal writes stay on the loop), the disk is slow,
or the store is remote (its `sync_mode` is "thread": etcd), commits go to the worker and
the event loop never blocks on the disk.  Store calls of their own (`call`) always do.

An audited call's first write carries its audit entry (docs/contracts.md#audit-log), so
the entry commits with the change it tells of at no extra cost.  A write may carry events
(docs/contracts.md#events): the store numbers them inside the
write's transaction, and once that commits they go to `on_events` (on the event loop, in
index order) before any write of the batch is answered.

Writes are applied in the order they were enqueued (enqueueing is synchronous, so the
order is the order of the event loop's decisions).  If a batch fails with a storage error,
every write of it fails (nothing was stored).  If it fails with anything else (one write
that cannot be stored), the writes are retried one by one so that only that one fails:
one client's bad write never fails another's.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from client import errors
from client._server.audit import AuditCall
from client._server.audit import current as current_audit
from client._server.write_placement import WritePlacement
from client.api.common import Event
from luxid.jobs import Job
from luxid.storage.base import JobStore, StoreTransaction

log = logging.getLogger(__name__)

T = TypeVar("T")
# How often close() says what it still waits for.
CLOSE_REPORT_EVERY = 1.0


@dataclass
class _Write:
    """One queued write: new jobs, job updates, or a function, and the events they cause.

    `func` runs inside the batch's transaction; `alone` runs between transactions with
    the store itself (for store methods that make their own transaction).
    """

    future: asyncio.Future[Any]
    new: Sequence[Job] = ()
    jobs: Sequence[Job] = ()
    func: Callable[[StoreTransaction], Any] | None = None
    alone: Callable[[JobStore], Any] | None = None
    events: Sequence[Event] = ()
    audit: AuditCall | None = None
    result: Any = field(default=None)

    def apply(self, tx: StoreTransaction) -> None:
        if self.new:
            tx.insert(self.new)
        if self.jobs:
            tx.update(self.jobs)
        if self.func is not None:
            self.result = self.func(tx)
        if self.events:
            tx.append_events(self.events)
        if self.audit is not None:
            tx.append_audit(self.audit.ride(time.time()))


Outcome = BaseException | None
EventSink = Callable[[list[Event]], None]


class GroupCommit:
    """Serialises and batches the writes of one JobStore (see the module docstring)."""

    def __init__(self, store: JobStore, on_events: EventSink | None = None) -> None:
        self.store = store
        self.on_events = on_events
        self._placement = WritePlacement(store.sync_mode)
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="luxid-store")
        self._queue: list[_Write] = []
        self._flusher: asyncio.Task[None] | None = None
        self._closed = False

    def insert(self, jobs: Sequence[Job], events: Sequence[Event] = ()) -> asyncio.Future[None]:
        """Store new jobs (ids allocated by luxid above every stored one)."""
        return self._enqueue(new=jobs, events=events)

    def update(self, jobs: Sequence[Job], events: Sequence[Event] = ()) -> asyncio.Future[None]:
        """Store the new state of existing jobs."""
        return self._enqueue(jobs=jobs, events=events)

    def run(
        self, func: Callable[[StoreTransaction], T], events: Sequence[Event] = ()
    ) -> asyncio.Future[T]:
        """Run `func(tx)` inside a write transaction, in the worker; resolves to its result."""
        return self._enqueue(func=func, events=events)

    def events(self, events: Sequence[Event]) -> asyncio.Future[None]:
        """Store events that no job change carries (a pending_reason, a drain line)."""
        return self._enqueue(events=events)

    def call(self, func: Callable[[JobStore], T]) -> asyncio.Future[T]:
        """Run `func(store)` in the worker after the writes queued before it."""
        return self._enqueue(alone=func)

    @property
    def pending(self) -> int:
        """Writes queued or being committed."""
        return len(self._queue) + (1 if self._flushing else 0)

    @property
    def _flushing(self) -> bool:
        """A flush task is under way (a finished one, even started eagerly, is not)."""
        return self._flusher is not None and not self._flusher.done()

    async def close(self, timeout: float) -> bool:
        """Wait (at most `timeout` s) for queued writes, then stop the worker thread.

        Says every second what it still waits for.  False if writes were still running
        when the time was up (their callers were answered nothing; nothing acknowledged
        is lost, since acknowledgements follow commits).
        """
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while (flusher := self._flusher) is not None and not flusher.done():
            left = deadline - loop.time()
            if left <= 0:
                log.error("job store: giving up on %d unfinished write(s) at stop", self.pending)
                self._closed = True
                self._executor.shutdown(wait=False, cancel_futures=True)
                return False
            done, _ = await asyncio.wait({flusher}, timeout=min(left, CLOSE_REPORT_EVERY))
            if not done:
                log.warning("stopping: waiting for %d job store write(s)", self.pending)
        self._closed = True
        self._executor.shutdown(wait=False)
        return True

    # ---------------------------------------------------------------------------------

    def _enqueue(self, **what: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        write = _Write(future=loop.create_future(), **what)
        if self._closed:  # the term ended: nothing more is written (never left waiting)
            write.future.set_exception(
                errors.StorageError("the job store is closed: this luxid stopped serving")
            )
            return write.future
        call = current_audit()
        if call is not None and what.get("alone") is None and call.take():
            write.audit = call  # the audited call's entry commits with its first write
        self._queue.append(write)
        if not self._flushing:
            self._flusher = loop.create_task(self._flush())
        return write.future

    async def _flush(self) -> None:
        """Commit what is queued, batch after batch, until the queue is empty."""
        loop = asyncio.get_running_loop()
        # Let the rest of this loop round queue its writes: the daemons start tasks
        # eagerly (3.12+), which would otherwise commit the first write of a round alone.
        await asyncio.sleep(0)
        while self._queue:
            batch, self._queue = self._queue, []
            if self._placement.use_thread() or any(w.alone is not None for w in batch):
                try:
                    outcomes, events = await loop.run_in_executor(
                        self._executor, self._timed, batch
                    )
                except RuntimeError:  # the worker was stopped (close gave up waiting)
                    closed = errors.StorageError("the job store is closed: nothing was written")
                    outcomes, events = [closed] * len(batch), []
            else:
                outcomes, events = self._timed(batch)
            if events and self.on_events is not None:
                self.on_events(events)
            for write, outcome in zip(batch, outcomes, strict=True):
                if write.audit is not None:  # durable with the write, or given back
                    write.audit.recorded = outcome is None
                    write.audit.taken = outcome is None
                if write.future.done():
                    continue
                if outcome is None:
                    write.future.set_result(write.result)
                else:
                    write.future.set_exception(outcome)

    def _timed(self, batch: list[_Write]) -> tuple[list[Outcome], list[Event]]:
        """Process `batch` and tell the placement its size and time (where the next goes)."""
        start = time.perf_counter()
        events: list[Event] = []
        outcomes = self._process(batch, events)
        self._placement.wrote(len(batch), time.perf_counter() - start)
        return outcomes, events

    def _process(self, batch: list[_Write], events: list[Event]) -> list[Outcome]:
        """Consecutive transactional writes commit together, in order (on the worker, or
        on the event loop for a lone writer); the events committed go to `events`."""
        outcomes: list[Outcome] = []
        group: list[_Write] = []
        for write in batch:
            if write.alone is None:
                group.append(write)
                continue
            outcomes += self._commit(group, events)
            group = []
            try:
                write.result = write.alone(self.store)
                outcomes.append(None)
            except errors.RpcError as exc:
                outcomes.append(exc)
            except Exception:
                log.exception("job store call failed")
                outcomes.append(errors.InternalError("job store call failed; see the luxid log"))
        outcomes += self._commit(group, events)
        return outcomes

    def _commit(self, group: list[_Write], events: list[Event]) -> list[Outcome]:
        if not group:
            return []
        try:
            with self.store.transaction() as tx:
                for write in group:
                    write.apply(tx)
            events += tx.events
            return [None] * len(group)
        except errors.StorageError as exc:
            log.error("job store write failed: %s", exc.message)
            return [exc] * len(group)
        except Exception as exc:
            if len(group) == 1:
                if isinstance(exc, errors.RpcError):
                    return [exc]
                log.exception("job store write failed")
                return [errors.InternalError("job store write failed; see the luxid log")]
        return [self._commit([write], events)[0] for write in group]
