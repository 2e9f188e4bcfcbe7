"""Group commit for the job store: every write of luxid goes through one worker thread.

A commit costs one fsync (milliseconds on many disks), so writes are never made one by
one: callers enqueue them and await their result; the worker takes everything queued so
far and commits it in ONE transaction.  While a commit runs, new writes queue up for the
next one, so N concurrent submits or job reports cost one fsync, not N.  The event loop
never blocks on the disk.

Writes are applied in the order they were enqueued (enqueueing is synchronous, so the
order is the order of the event loop's decisions).  If a batch fails with a storage
error, every write of it fails (nothing was stored).  If it fails with anything else (a
bug in one builder), the writes are retried one by one so that only the faulty one fails.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TypeVar

from client import errors
from luxid.jobs import Job
from luxid.store import JobBuilder, JobStore, StoreTransaction

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class _Write:
    """One queued write: new jobs to build, jobs to update, or a function.

    `func` runs inside the batch's transaction; `alone` runs between transactions with
    the store itself (for store methods that make their own transaction).
    """

    future: asyncio.Future[Any]
    builders: Sequence[JobBuilder] = ()
    jobs: Sequence[Job] = ()
    func: Callable[[StoreTransaction], Any] | None = None
    alone: Callable[[JobStore], Any] | None = None
    result: Any = field(default=None)

    def apply(self, tx: StoreTransaction) -> None:
        if self.builders:
            self.result = tx.submit(self.builders)
        if self.jobs:
            tx.update(self.jobs)
        if self.func is not None:
            self.result = self.func(tx)


Outcome = BaseException | None


class StoreWriter:
    """Serialises and batches the writes of one JobStore (see the module docstring)."""

    def __init__(self, store: JobStore) -> None:
        self.store = store
        self._executor = ThreadPoolExecutor(1, thread_name_prefix="luxid-store")
        self._queue: list[_Write] = []
        self._flusher: asyncio.Task[None] | None = None

    def submit(self, builders: Sequence[JobBuilder]) -> asyncio.Future[list[Job]]:
        """Allocate ids and store the jobs the builders make (they run in the worker)."""
        return self._enqueue(builders=builders)

    def update(self, jobs: Sequence[Job]) -> asyncio.Future[None]:
        """Store the new state of existing jobs."""
        return self._enqueue(jobs=jobs)

    def run(self, func: Callable[[StoreTransaction], T]) -> asyncio.Future[T]:
        """Run `func(tx)` inside a write transaction, in the worker; resolves to its result."""
        return self._enqueue(func=func)

    def call(self, func: Callable[[JobStore], T]) -> asyncio.Future[T]:
        """Run `func(store)` in the worker after the writes queued before it."""
        return self._enqueue(alone=func)

    async def close(self) -> None:
        """Wait for queued writes, then stop the worker thread."""
        while self._flusher is not None:
            await asyncio.shield(self._flusher)
        self._executor.shutdown(wait=True)

    # ---------------------------------------------------------------------------------

    def _enqueue(self, **what: Any) -> asyncio.Future[Any]:
        loop = asyncio.get_running_loop()
        write = _Write(future=loop.create_future(), **what)
        self._queue.append(write)
        if self._flusher is None:
            self._flusher = loop.create_task(self._flush())
        return write.future

    async def _flush(self) -> None:
        loop = asyncio.get_running_loop()
        try:
            while self._queue:
                batch, self._queue = self._queue, []
                outcomes = await loop.run_in_executor(self._executor, self._process, batch)
                for write, outcome in zip(batch, outcomes, strict=True):
                    if write.future.done():
                        continue
                    if outcome is None:
                        write.future.set_result(write.result)
                    else:
                        write.future.set_exception(outcome)
        finally:
            self._flusher = None

    def _process(self, batch: list[_Write]) -> list[Outcome]:
        """Worker thread: consecutive transactional writes commit together, in order."""
        outcomes: list[Outcome] = []
        group: list[_Write] = []
        for write in batch:
            if write.alone is None:
                group.append(write)
                continue
            outcomes += self._commit(group)
            group = []
            try:
                write.result = write.alone(self.store)
                outcomes.append(None)
            except errors.RpcError as exc:
                outcomes.append(exc)
            except Exception:
                log.exception("job store call failed")
                outcomes.append(errors.InternalError("job store call failed; see the luxid log"))
        outcomes += self._commit(group)
        return outcomes

    def _commit(self, group: list[_Write]) -> list[Outcome]:
        if not group:
            return []
        try:
            with self.store.transaction() as tx:
                for write in group:
                    write.apply(tx)
            return [None] * len(group)
        except errors.StorageError as exc:
            log.error("job store write failed: %s", exc.message)
            return [exc] * len(group)
        except Exception as exc:
            if len(group) == 1:
                log.exception("job store write failed")
                if isinstance(exc, errors.RpcError):
                    return [exc]
                return [errors.InternalError("job store write failed; see the luxid log")]
        return [self._commit([write])[0] for write in group]
