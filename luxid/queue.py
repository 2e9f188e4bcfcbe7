"""The job queue's imperative shell: it applies the pure decisions of luxid.jobs and
luxid.filters to the live jobs, the store, the job processes and the clocks.

luxid decides on one thread: everything here runs on the event loop.  The decisions are
made by pure functions (the transitions, `apply_report`, `select_jobs` through
luxid.scheduler) with the one filter set of luxid.active_filters, and this class does
what they say: persist (luxid.live_jobs, the one write path), start and signal processes
(luxid.processes), wake watchers.  The store's worker thread only writes.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable, Coroutine, Iterable, Sequence
from typing import Any

import msgspec

from client import errors
from client._server.audit import AuditCall
from client._server.event_log import EventLog
from client._server.metrics import Registry
from client._server.server import Connection
from client.api.luxi import Directive, JobChange, JobEvent, Opcode, QueueOverview
from client.filterrules import FilterRule
from client.identity import START_TIME_TOLERANCE, ProcessKey, is_alive, start_time_of
from client.vocabulary import JOB_STATUSES
from luxid.active_filters import ActiveFilters
from luxid.events import drain_flag_event, filter_event
from luxid.jobs import (
    Job,
    cancel_job,
    change_priority,
    fail_job,
    is_finalized,
    job_fields,
    job_status,
    log_entries_since,
    new_job,
    process_exited,
    start_job,
    validate_fields,
)
from luxid.jobs.reports import apply_report, first_directive
from luxid.live_jobs import LiveJobs
from luxid.overview import queue_overview
from luxid.processes import JobProcesses, Spawner, SpawnError
from luxid.scheduler import Scheduler
from luxid.shutdown import bounded
from luxid.storage import JobStore

log = logging.getLogger(__name__)

DEFAULT_MAX_RUNNING_JOBS = 20  # shown until the configuration has been read
AUTO_ARCHIVE_CHUNK = 1000
# The longest wait_for_job_change honours (a day); longer or infinite timeouts are cut.
MAX_WAIT = 86400.0
_SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


class Queue:
    """Live jobs, their processes and the scheduler (see the module docstring)."""

    def __init__(
        self,
        store: JobStore,
        make_spawner: Callable[[JobProcesses], Spawner],
        sweep_interval: float,
        events: EventLog | None = None,
    ) -> None:
        self.metrics = Registry("luxid")  # the daemon's metrics, kept where things happen
        self.live = LiveJobs(store, self.metrics, events.publish if events else None)
        self.filters = ActiveFilters(self.metrics)
        self.procs = JobProcesses(make_spawner, self.process_exited, sweep_interval)
        self.drained = bool(store.meta("drained"))
        self._starting: dict[int, asyncio.Future[None]] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self.scheduler = Scheduler(
            self.live, self.filters,
            start=lambda job_id: self._background(self._start(job_id)),
            pause=self._tell_paused,
            finished=self._finished_maybe,
        )  # fmt: skip
        # Unfinished jobs by the job they depend on: the end of a job that held no slot
        # concerns only them (no slot, rate limit or bucket was freed).
        self._dependents: dict[int, set[int]] = {}
        self._note_dependencies(self.live.jobs[i] for i in self.scheduler.unfinished)
        self.request_pass = self.scheduler.request_pass
        # Set once the configuration was first read: until then luxid does not know the
        # filters, so it judges no submit and shows no rules (what query_filters shows is
        # what the next submit is judged by, docs/contracts.md#filters).
        self.settings_known = asyncio.Event()

    # -- life cycle ----------------------------------------------------------------------

    async def open(self) -> None:
        """Reattach to the job processes that survived luxid; fail the jobs of dead ones."""
        now = time.time()
        dead = []
        for job in self.live.jobs.values():
            if is_finalized(job) or job.process_id is None:
                continue
            key = ProcessKey(job.process_id, job.process_start or 0.0)
            if is_alive(key):
                self.scheduler.take_slot(job.id)
                self.procs.attach(job.id, key)
                log.info("job %d: reattached to its process %d", job.id, key.pid)
            else:
                ended = process_exited(job, now)
                dead.append(ended)
                if is_finalized(ended):
                    log.warning("job %d: its process %d died while luxid was away", job.id, key.pid)
                else:
                    log.info("job %d: paused; its process %d ended meanwhile", job.id, key.pid)
        await self.live.commit(dead)
        for job in dead:
            self._finished_maybe(job)
        self.procs.start_watching()
        self._background(self.procs.prepare())

    async def close(self, timeout: float) -> None:
        """Stop scheduling and background work within `timeout` s; job processes keep
        running.  Every wait is bounded and says what it waits for (luxid.shutdown)."""
        self.scheduler.cancel()
        for task in list(self._tasks):
            task.cancel()
        if self._tasks:
            await bounded("job starts to wind down", asyncio.wait(set(self._tasks)), timeout)
        await bounded("the job zygote to stop", self.procs.close(), timeout)
        if await self.live.writer.close(timeout):
            self.live.store.close()

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- configuration -------------------------------------------------------------------

    def config_changed(self, max_running_jobs: int, filters: list[Any]) -> None:
        """The configuration was read (WconfdLink): take its settings, schedule if needed."""
        changed = self.filters.replace_all(filters)
        self.settings_known.set()
        if max_running_jobs != self.scheduler.max_running_jobs:
            self.scheduler.max_running_jobs = max_running_jobs
            changed = True
        if changed:
            self.request_pass()

    # -- filter rules ----------------------------------------------------------------------

    async def rule_written(self, rule: FilterRule) -> None:
        """luxid wrote a rule to wconfd (luxid.filter_writes): judge by it at once; its
        event is durable before this returns."""
        action = "update" if rule.uuid in self.filters.rules else "add"
        self.filters.put(rule)
        self.request_pass()
        data = msgspec.to_builtins(rule)
        await self.live.record([filter_event(action, rule.uuid, data, time.time())])

    async def rule_removed(self, uuid: str) -> None:
        """luxid removed a rule from wconfd (luxid.filter_writes): judge without it."""
        self.filters.remove(uuid)
        self.request_pass()
        await self.live.record([filter_event("remove", uuid, None, time.time())])

    def filter_rows(
        self, uuids: Sequence[str] | None, fields: Sequence[str] | None
    ) -> list[list[Any]]:
        """query_filters' answer: the rules the next submit is judged by."""
        return self.filters.rows(uuids, fields)

    # -- submit --------------------------------------------------------------------------

    async def submit(
        self, jobs: list[list[Opcode]], *, internal: bool = False, audit: AuditCall | None = None
    ) -> list[Job]:
        """Store new jobs (validated by the caller); REJECTed ones are stored canceled.
        `internal` jobs (a drain's) are not refused by the drain flag.  `audit`: the
        submitting call, whose entry names the job it submits (it commits with the job)."""
        await self.settings_known.wait()
        if self.drained and not internal:
            raise errors.QueueDrained(
                "the queue is drained: no new jobs are accepted (`lw queue undrain`)"
            )
        now = time.time()
        ids = self.live.allocate_ids(len(jobs))
        if audit is not None and len(ids) == 1:
            audit.target = f"job/{ids[0]}"
        judge = self.filters.judge_new
        stored = [
            judge(new_job(job_id, ops, now), now) for job_id, ops in zip(ids, jobs, strict=True)
        ]
        try:
            await self.live.add(stored)
        except errors.RpcError:
            for job_id in ids:
                self.filters.forget(job_id)
            raise
        fresh = [job.id for job in stored if not is_finalized(job)]
        self.scheduler.jobs_added(fresh)
        self._note_dependencies(job for job in stored if job.depends and job.id in fresh)
        self.request_pass(new=fresh)
        self.scheduler.place_new_jobs()
        return stored

    async def set_drained(self, flag: bool) -> None:
        """Set the durable drain flag (and its event, when it changes)."""
        events = [drain_flag_event(flag, time.time())] if flag != self.drained else []
        await self.live.set_meta("drained", int(flag), events)
        self.drained = flag
        self.live.serial.bump()

    # -- queries -------------------------------------------------------------------------

    @property
    def last_job_id(self) -> int:
        """The last job id handed out (a new filter rule's watermark)."""
        return self.live.last_id

    def jobs(self) -> Iterable[Job]:
        """The live jobs (not archived)."""
        return self.live.jobs.values()

    def get(self, job_id: int) -> Job | None:
        """A live job, or None."""
        return self.live.get(job_id)

    def find(self, job_id: int) -> Job | None:
        """A live or archived job, or None if there never was such a job."""
        return self.live.find(job_id)

    def tell_job_changes(self, listener: Callable[[list[int]], None]) -> None:
        """Have `listener` told the ids of every durable job change (the drains follow
        their jobs so)."""
        self.live.on_change = listener

    async def wait_change(self, since_serial: int, timeout: float) -> int:
        """wait_queue_change: the queue's change serial once it moved past `since_serial`
        (or at the timeout)."""
        return await self.live.serial.wait(since_serial, timeout)

    def query(self, ids: list[int] | None, fields: list[str]) -> list[list[Any] | None]:
        """query_jobs rows; archived jobs are read from the store."""
        fields = validate_fields(fields)
        if ids is None:
            return [job_fields(job, fields) for _, job in sorted(self.live.jobs.items())]
        rows: list[list[Any] | None] = []
        for job_id in ids:
            job = self.live.find(job_id)
            rows.append(None if job is None else job_fields(job, fields))
        return rows

    async def wait_for_change(
        self,
        job_id: int,
        fields: list[str],
        prev_values: list[Any] | None,
        prev_log_serial: int | None,
        timeout: float,
    ) -> JobChange | str:
        """wait_for_job_change: woken by the job's committed changes, never polled."""
        fields = validate_fields(fields)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(0.0, timeout), MAX_WAIT)
        while True:
            job = self.live.find(job_id)
            if job is None:
                raise errors.NotFound(f"job {job_id} not found")
            values = msgspec.to_builtins(job_fields(job, fields))
            entries = log_entries_since(job, prev_log_serial)
            if values != prev_values or entries or is_finalized(job):
                return JobChange(values=values, log=[tuple(e) for e in entries])
            remaining = deadline - loop.time()
            if remaining <= 0:
                return "nochange"
            try:
                await asyncio.wait_for(asyncio.shield(self.live.changed(job_id)), remaining)
            except TimeoutError:
                return "nochange"

    def overview(self, queued: int, recent: int) -> QueueOverview:
        """query_queue_overview's answer (luxid.overview): O(unfinished), not O(queue) rows."""
        return queue_overview(self.live.jobs, self.scheduler.unfinished, queued, recent)

    def queue_info(self) -> dict[str, Any]:
        """query_queue_info's answer."""
        counts = dict.fromkeys(JOB_STATUSES, 0)
        for job in self.live.jobs.values():
            counts[job_status(job)] += 1
        return {
            "drained": self.drained,
            "max_running_jobs": self.scheduler.max_running_jobs or DEFAULT_MAX_RUNNING_JOBS,
            "running": self.scheduler.slots_taken,
            "counts": counts,
            "filters": len(self.filters),
        }

    # -- requests on one job ---------------------------------------------------------------

    def _job(self, job_id: int) -> Job:
        job = self.live.find(job_id)
        if job is None:
            raise errors.NotFound(f"job {job_id} not found")
        return job

    async def cancel(self, job_id: int, kill: bool) -> tuple[bool, str]:
        """cancel_job: the pure decision, made durable, then the signal to the process."""
        job = self._job(job_id)
        outcome = cancel_job(job, time.time(), kill)
        if outcome.job is not job:
            await self.live.commit([outcome.job])
            self._finished_maybe(outcome.job)
        if outcome.signal is not None and job.process_id is not None:
            self.procs.signal(self._key(job), _SIGNALS[outcome.signal])
        return outcome.ok, outcome.message

    async def change_priority(self, job_id: int, priority: int) -> tuple[bool, str]:
        """change_job_priority; a running job's process is told (SIGUSR1) to look."""
        job = self._job(job_id)
        outcome = change_priority(job, priority)
        if outcome.job is not job:
            await self.live.commit([outcome.job])
            self.request_pass()
        if outcome.notify and job.process_id is not None:
            self.procs.signal(self._key(job), signal.SIGUSR1)
        return outcome.ok, outcome.message

    async def archive(self, job_id: int) -> bool:
        """archive_job: finalized live jobs move to the archive (and out of memory)."""
        job = self._job(job_id)
        if job.archived or not is_finalized(job):
            return False
        archived = await self.live.archive(job_id)
        self.filters.forget(job_id)
        return archived

    async def auto_archive(self, age: float, timeout: float | None) -> tuple[int, int]:
        """auto_archive_jobs: archive in chunks until none is left or the time is up."""
        start = time.monotonic()
        cutoff = time.time() - age
        archived = 0
        while True:
            done, remaining = await self.live.auto_archive(cutoff, AUTO_ARCHIVE_CHUNK)
            for job_id in done:
                self.filters.forget(job_id)
            archived += len(done)
            if not remaining or not done:
                return archived, remaining
            if timeout is not None and time.monotonic() - start >= timeout:
                return archived, remaining

    # -- job processes ---------------------------------------------------------------------

    @staticmethod
    def _key(job: Job) -> ProcessKey:
        assert job.process_id is not None
        return ProcessKey(job.process_id, job.process_start or 0.0)

    async def report(self, conn: Connection, job_id: int, event: JobEvent) -> Directive:
        """job_report: only the job's own process may report; the answer is durable."""
        job = await self._reporting_job(conn, job_id)
        new, answer = apply_report(job, event, time.time())
        if new is not job:
            await self.live.commit([new])
            if not self._finished_maybe(new) and answer.stop:
                self.request_pass()  # a paused job let go of its opcode
        return answer

    async def _reporting_job(self, conn: Connection, job_id: int) -> Job:
        """The job, if the connection's peer is its recorded process (PermissionDenied)."""
        pid = conn.peer.pid
        starting = self._starting.get(job_id)
        if starting is not None:
            await asyncio.shield(starting)  # its start is being recorded
        job = self._job(job_id)
        if job.process_id != pid:
            raise errors.PermissionDenied(
                f"process {pid} is not the recorded process of job {job_id}"
            )
        if conn.session != job.process_id:  # first report on this connection
            start = start_time_of(pid)
            if start is None or abs(start - (job.process_start or 0.0)) > START_TIME_TOLERANCE:
                raise errors.PermissionDenied(
                    f"process {pid} did not start when job {job_id}'s process did"
                )
            conn.session = pid
        return job

    async def _start(self, job_id: int) -> None:
        """Start the job's process and record its identity before it may run anything."""
        started = asyncio.get_running_loop().create_future()
        self._starting[job_id] = started
        try:
            try:
                key = await self.procs.spawn(job_id, self._first_directive(job_id))
            except SpawnError as exc:
                log.error("job %d: %s", job_id, exc)
                job = self.live.get(job_id)
                if job is not None:
                    self._finish(fail_job(job, time.time(), f"job process could not start: {exc}"))
                return
            job = self.live.get(job_id)
            if job is None or is_finalized(job):  # canceled while starting: it did nothing
                self.procs.signal(key, signal.SIGKILL)
                self.scheduler.release_slot(job_id)
                return
            await self.live.commit([start_job(job, time.time(), key.pid, key.start_time)])
            if not is_alive(key):  # died before its start was recorded
                self.process_exited(job_id, key)
        except errors.RpcError as exc:
            log.error("job %d: cannot record its start: %s", job_id, exc.message)
            self.scheduler.release_slot(job_id)
        finally:
            started.set_result(None)
            del self._starting[job_id]

    def _first_directive(self, job_id: int) -> Directive | None:
        job = self.live.get(job_id)
        return None if job is None else first_directive(job, time.time())

    def process_exited(self, job_id: int, key: ProcessKey) -> None:
        """A job process is gone: its job fails unless finalized (or paused between ops)."""
        job = self.live.get(job_id)
        if job is None or job.process_id != key.pid:
            return
        new = process_exited(job, time.time())
        if new is job:  # finalized before its process ended: its slot is free already
            return
        self.scheduler.release_slot(job_id)
        if not is_finalized(new):
            log.info("job %d: paused; its process %d ended", job_id, key.pid)
        else:
            log.warning("job %d: its process %d died", job_id, key.pid)
        self._finish(new)
        self.request_pass()

    def _finish(self, job: Job) -> None:
        """Commit a job that the shell finalized (in the background) and reschedule."""
        self.live.commit_soon([job])
        self._finished_maybe(job)

    def _finished_maybe(self, job: Job) -> bool:
        """Release the slot of a finalized job and reschedule; True if it is finalized.

        A job that held a slot frees room for the next queued jobs: a pass that fills the
        free slots.  One that held none (canceled or rejected while queued) frees nothing
        but its dependants' wait.
        """
        if not is_finalized(job):
            return False
        held_slot = self.scheduler.job_finalized(job.id)
        self.filters.forget(job.id)
        dependents = self._dependents.pop(job.id, ())
        if held_slot:
            self.scheduler.slot_freed(dependents)
        elif dependents:
            self.request_pass(new=dependents)
        return True

    def _note_dependencies(self, jobs: Iterable[Job]) -> None:
        for job in jobs:
            for dep in job.depends:
                self._dependents.setdefault(dep.job_id, set()).add(job.id)

    def _tell_paused(self, job: Job) -> None:
        """A PAUSE rule applies to a started job: in a lock wait it can stop now, tell it."""
        if job.process_id is not None:
            self.procs.signal(self._key(job), signal.SIGUSR1)
