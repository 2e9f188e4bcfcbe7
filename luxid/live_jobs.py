"""The live jobs in memory, kept in step with the store: luxid's one write path for jobs.

luxid keeps every non-archived job in memory (a dict of frozen Job values) and answers
queries from it.  Every job change goes through this module, on the event loop:

- new jobs get their ids here (`allocate_ids`, in memory, above every id ever stored) and
  are written with `add`; they enter memory once durable (a query never shows a job that
  a crash could lose);
- a change of a live job is made in memory first (`commit`, `commit_soon`), so the next
  decision of the event loop builds on it, then written; whoever caused it is answered
  once it is durable, and the watchers of the job (wait_for_job_change) are woken then
  too.  If the write fails, the jobs are reloaded from the store, so memory never stays
  ahead of the disk;
- archiving (`archive`, `auto_archive`) drops jobs from memory once durable.

Each change of a job's status or pending_reason is also an event (luxid.events,
docs/contracts.md#events): `put` notes it, and the next write carries it, so the job store
numbers it in the transaction of the change itself; a pending_reason, which is not stored
with the job, is written as the event alone.

The writes go through the group commit (luxid.storage.group_commit), the only writer.
Every job change passing here also keeps the job metrics (luxid.job_metrics), so no
scrape ever scans the jobs.  Archived jobs live only in the store (100,000 archived jobs in
little memory: docs/contracts.md#performance-targets).  Ids of a failed insert are not
handed out again while luxid runs (ids are never reused by an acknowledged job, which is all
docs/contracts.md#job-model promises to observers).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable

from client import errors
from client._server.change_serial import ChangeSerial
from client._server.metrics import Registry
from client.api.common import Event
from luxid.events import job_event, job_events
from luxid.job_metrics import JobMetrics
from luxid.jobs import Job, job_status
from luxid.storage import JobStore
from luxid.storage.group_commit import GroupCommit

log = logging.getLogger(__name__)


class LiveJobs:
    """Live jobs by id, their durable writes and their change futures."""

    def __init__(
        self,
        store: JobStore,
        metrics: Registry,
        on_events: Callable[[list[Event]], None] | None = None,
    ) -> None:
        self.store = store
        self.writer = GroupCommit(store, on_events)
        self._due_events: list[Event] = []  # noted by `put`, carried by the next write
        self.jobs: dict[int, Job] = {job.id: job for job in store.load_live()}
        self.metrics = JobMetrics(metrics)
        for job in self.jobs.values():
            self.metrics.recount(None, job)
        self.last_id = store.last_job_id
        self._changed: dict[int, asyncio.Future[None]] = {}
        self.serial = ChangeSerial()  # wait_queue_change: bumped with every notification
        # Told the ids of every durable change (the drains follow their jobs with it; set
        # by luxid.term through Queue.tell_job_changes).
        self.on_change: Callable[[list[int]], None] | None = None

    # -- reads -------------------------------------------------------------------------

    def get(self, job_id: int) -> Job | None:
        """A live job, or None."""
        return self.jobs.get(job_id)

    def find(self, job_id: int) -> Job | None:
        """A live or archived job, or None if there never was such a job."""
        job = self.jobs.get(job_id)
        if job is None and 0 < job_id <= self.last_id:
            job = self.store.load_job(job_id)
        return job

    def status_of(self, job_id: int) -> str | None:
        """Any job's status (archived ones included), None if unknown."""
        job = self.jobs.get(job_id)
        if job is not None:
            return job_status(job)
        return self.store.status_of(job_id)

    # -- writes ------------------------------------------------------------------------

    def allocate_ids(self, count: int) -> list[int]:
        """`count` new job ids, above every id allocated before (the filters' watermark)."""
        first = self.last_id + 1
        self.last_id += count
        return list(range(first, first + count))

    async def add(self, jobs: list[Job]) -> None:
        """Store new jobs (ids from `allocate_ids`); once durable they are live and watched."""
        if jobs:
            await self.writer.insert(jobs, job_events(((None, j) for j in jobs), time.time()))
            self.metrics.submitted(len(jobs))
        self._set(jobs)
        self.notify(job.id for job in jobs)

    def put(self, jobs: Iterable[Job]) -> list[Job]:
        """Set the jobs in memory (not durable yet); returns them.  The events of their
        changes go with the next write (`commit_soon`)."""
        out = list(jobs)
        live, due, now = self.jobs, self._due_events, time.time()
        for job in out:
            event = job_event(live.get(job.id), job, now)
            if event is not None:
                due.append(event)
        self._set(out)
        return out

    def _set(self, jobs: Iterable[Job]) -> None:
        live, changed = self.jobs, self.metrics.changed
        for job in jobs:
            changed(live.get(job.id), job)
            live[job.id] = job

    async def commit(self, jobs: Iterable[Job]) -> None:
        """Set the jobs in memory, make them durable, then wake their watchers.

        On a storage failure the jobs are reloaded from the store and the error raised.
        """
        await self.commit_soon(jobs)

    def commit_soon(self, jobs: Iterable[Job]) -> asyncio.Future[None]:
        """Set the jobs in memory and enqueue their write now (writes keep the order of
        the changes); the future resolves once they are durable and watchers are woken.
        Nobody needs to await it (a scheduling pass does not)."""
        changed = self.put(jobs)
        loop = asyncio.get_running_loop()
        done: asyncio.Future[None] = loop.create_future()
        events, self._due_events = self._due_events, []
        if not changed:
            if events:  # pending reasons put without a job write
                self.writer.events(events).add_done_callback(_retrieved)
            done.set_result(None)
            return done
        write = self.writer.update(changed, events)
        write.add_done_callback(lambda fut: self._written(fut, changed, done))
        return done

    def _written(
        self, write: asyncio.Future[None], jobs: list[Job], done: asyncio.Future[None]
    ) -> None:
        exc = write.exception()
        ids = [job.id for job in jobs]
        if exc is not None:
            log.error("could not store jobs %s: %s", ids, exc)
            self._reload(ids)
            if not done.done():
                done.set_exception(exc)
                done.exception()  # retrieved: fire-and-forget callers need not look
            return
        self.notify(ids)
        if not done.done():
            done.set_result(None)

    async def archive(self, job_id: int) -> bool:
        """Archive one finalized live job; True if it was archived (then it leaves memory)."""
        done = await self.writer.run(lambda tx: tx.archive([job_id]))
        self.drop(done)
        return bool(done)

    async def auto_archive(self, older_than: float, limit: int) -> tuple[list[int], int]:
        """Archive up to `limit` jobs finalized before `older_than`: (archived, remaining)."""
        done, remaining = await self.writer.call(
            lambda store: store.auto_archive(older_than, limit)
        )
        self.drop(done)
        return done, remaining

    async def set_meta(self, key: str, value: int, events: list[Event] | None = None) -> None:
        """Store a small durable setting (the drain flag), with its events."""
        await self.writer.run(lambda tx: tx.set_meta(key, value), events or ())

    def note_events(self, events: Iterable[Event]) -> None:
        """Events of a decision made now (a start past a budget), carried by the next
        write as `put`'s are."""
        self._due_events.extend(events)

    async def record(self, events: list[Event]) -> None:
        """Make events of changes kept elsewhere durable (a filter, a drain line)."""
        if events:
            await self.writer.events(events)

    def drop(self, ids: Iterable[int]) -> None:
        """Archived jobs leave memory."""
        self.serial.bump()
        for job_id in ids:
            job = self.jobs.pop(job_id, None)
            if job is not None:
                self.metrics.recount(job, None)
            self._wake(job_id)

    def _reload(self, ids: list[int]) -> None:
        try:
            stored = self.store.load_jobs(ids)
        except errors.RpcError as exc:
            log.error("cannot reload jobs %s after a failed write: %s", ids, exc.message)
            return
        for job_id in ids:
            job = stored.get(job_id)
            if job is not None and job.archived:
                job = None
            old = self.jobs.pop(job_id, None) if job is None else self.jobs.get(job_id)
            if job is not None:
                self.jobs[job_id] = job
            self.metrics.recount(old, job)
        self.notify(ids)

    # -- change notification -----------------------------------------------------------

    def notify(self, ids: Iterable[int]) -> None:
        """Wake everyone waiting for a change of these jobs."""
        ids = list(ids)
        self.serial.bump()
        for job_id in ids:
            self._wake(job_id)
        if self.on_change is not None:
            self.on_change(ids)

    def _wake(self, job_id: int) -> None:
        fut = self._changed.pop(job_id, None)
        if fut is not None and not fut.done():
            fut.set_result(None)

    def changed(self, job_id: int) -> asyncio.Future[None]:
        """A future resolved at the next change of the job (shared by all its watchers)."""
        fut = self._changed.get(job_id)
        if fut is None or fut.done():
            fut = asyncio.get_running_loop().create_future()
            self._changed[job_id] = fut
        return fut


def _retrieved(fut: asyncio.Future[None]) -> None:
    """An events-only write nobody awaits: a failure is logged, not left unretrieved."""
    if not fut.cancelled() and fut.exception() is not None:
        log.error("could not store events: %s", fut.exception())
