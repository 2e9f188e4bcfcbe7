"""The job queue's imperative shell: it applies the pure decisions of luxid.jobs and
luxid.filters to the live jobs, the store, the job processes and the clocks.

Everything runs on luxid's event loop; the decisions are made by pure functions
(`select_jobs`, the transitions, `apply_report`) and this class does what they say:
persist (luxid.table, luxid.writer), start and signal processes (luxid.processes),
wake watchers.

Scheduling is event-driven (SPEC §6.4): a submit, a job's end or process exit, a filter
or config change, a priority change or a cancel requests a pass; requests made in one
turn of the loop are served by one pass.  A pass after submits only (nothing else
changed) examines only the new jobs: earlier queued jobs were held for reasons new jobs
cannot remove, so their decisions stand.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import time
from collections.abc import Callable, Coroutine, Iterable
from typing import Any

import msgspec

from client import errors
from client.api.luxi import Directive, JobChange, JobEvent, Opcode
from client.daemon.procwatch import START_TIME_TOLERANCE, ProcessKey, is_alive, start_time_of
from client.daemon.server import Connection
from luxid.filters.ratelimit import paused_reason
from luxid.filterset import FilterSet, RuleSnapshot
from luxid.jobs import (
    Job,
    active_op_index,
    cancel_job,
    change_priority,
    fail_job,
    is_finalized,
    job_fields,
    job_status,
    log_entries_since,
    mark_canceled,
    new_job,
    pause_job,
    process_exited,
    select_jobs,
    set_pending_reason,
    start_job,
    unpause_job,
    validate_fields,
)
from luxid.jobs.reports import apply_report, first_directive
from luxid.processes import JobProcesses, Spawner, SpawnError
from luxid.store import JobStore
from luxid.table import JobTable
from luxid.writer import StoreWriter

log = logging.getLogger(__name__)

DEFAULT_MAX_RUNNING_JOBS = 20  # shown until the configuration has been read
AUTO_ARCHIVE_CHUNK = 1000
# Bounds of the gap between two full scheduling passes (see Queue.request_pass): the gap
# is the last pass's duration, so passes take at most half of the event loop's time.
MIN_PASS_GAP, MAX_PASS_GAP = 0.003, 0.05
_SIGNALS = {"TERM": signal.SIGTERM, "KILL": signal.SIGKILL}


def _build(job_id: int, ops: list[Opcode], now: float, rules: RuleSnapshot) -> Job:
    """A submitted job as stored: normalized, and canceled if a REJECT rule applies."""
    return rules.reject_on_submit(new_job(job_id, ops, now), now)


class Queue:
    """Live jobs, their processes and the scheduler (see the module docstring)."""

    def __init__(
        self,
        store: JobStore,
        make_spawner: Callable[[JobProcesses], Spawner],
        sweep_interval: float,
    ) -> None:
        self.store = store
        self.writer = StoreWriter(store)
        self.table = JobTable(store, self.writer)
        self.filters = FilterSet()
        self.procs = JobProcesses(make_spawner, self.process_exited, sweep_interval)
        self.drained = bool(store.meta("drained"))
        # None until the configuration was read: nothing is started before that, so no
        # job slips past a filter luxid does not know yet.
        self.max_running_jobs: int | None = None
        self._unfinished: set[int] = {j.id for j in self.table.jobs.values() if not is_finalized(j)}
        self._slots: set[int] = set()  # jobs holding a slot: a process, or one being started
        self._starting: dict[int, asyncio.Future[None]] = {}
        self._pass_full = False
        self._pass_new: set[int] = set()
        self._pass_handle: asyncio.Handle | None = None
        self._last_full_pass = 0.0
        self._pass_gap = MIN_PASS_GAP
        self._tasks: set[asyncio.Task[None]] = set()

    # -- life cycle ----------------------------------------------------------------------

    async def open(self) -> None:
        """Reattach to the job processes that survived luxid; fail the jobs of dead ones."""
        now = time.time()
        dead = []
        for job in self.table.jobs.values():
            if is_finalized(job) or job.process_id is None:
                continue
            key = ProcessKey(job.process_id, job.process_start or 0.0)
            if is_alive(key):
                self._slots.add(job.id)
                self.procs.attach(job.id, key)
                log.info("job %d: reattached to its process %d", job.id, key.pid)
            else:
                ended = process_exited(job, now)
                dead.append(ended)
                if is_finalized(ended):
                    log.warning("job %d: its process %d died while luxid was away", job.id, key.pid)
                else:
                    log.info("job %d: paused; its process %d ended meanwhile", job.id, key.pid)
        await self.table.commit(dead)
        self.procs.start_watching()
        self._background(self.procs.prepare())

    async def close(self) -> None:
        """Stop scheduling and background work; job processes keep running."""
        if self._pass_handle is not None:
            self._pass_handle.cancel()
        for task in list(self._tasks):
            task.cancel()
        await self.procs.close()
        await self.writer.close()
        self.store.close()

    def _background(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    # -- configuration -------------------------------------------------------------------

    def config_changed(self, max_running_jobs: int, filters: list[Any]) -> None:
        """The configuration was read (ConfigLink): take its settings, schedule if needed."""
        changed = self.filters.replace_all(filters)
        if max_running_jobs != self.max_running_jobs:
            self.max_running_jobs = max_running_jobs
            changed = True
        if changed:
            self.request_pass()

    # -- submit --------------------------------------------------------------------------

    async def submit(self, jobs: list[list[Opcode]]) -> list[Job]:
        """Store new jobs (validated by the caller); REJECTed ones are stored canceled."""
        if self.drained:
            raise errors.QueueDrained(
                "the queue is drained: no new jobs are accepted (`lw queue undrain`)"
            )
        now = time.time()
        rules = self.filters.snapshot
        builders = [functools.partial(_build, ops=ops, now=now, rules=rules) for ops in jobs]
        stored = await self.writer.submit(builders)
        self.table.added(stored)
        fresh = [job.id for job in stored if not is_finalized(job)]
        self._unfinished.update(fresh)
        self.request_pass(new=fresh)
        self._place_new_jobs()
        return stored

    async def set_drained(self, flag: bool) -> None:
        """Set the durable drain flag."""
        await self.writer.run(lambda tx: tx.set_meta("drained", int(flag)))
        self.drained = flag

    # -- queries -------------------------------------------------------------------------

    def query(self, ids: list[int] | None, fields: list[str]) -> list[list[Any] | None]:
        """query_jobs rows; archived jobs are read from the store."""
        fields = validate_fields(fields)
        if ids is None:
            return [job_fields(job, fields) for _, job in sorted(self.table.jobs.items())]
        rows: list[list[Any] | None] = []
        for job_id in ids:
            job = self.table.find(job_id)
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
        deadline = loop.time() + max(0.0, timeout)
        while True:
            job = self.table.find(job_id)
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
                await asyncio.wait_for(asyncio.shield(self.table.changed(job_id)), remaining)
            except TimeoutError:
                return "nochange"

    def queue_info(self) -> dict[str, Any]:
        """query_queue_info's answer."""
        counts = dict.fromkeys(("queued", "waiting", "running", "canceling", "canceled",
                                "success", "error"), 0)  # fmt: skip
        for job in self.table.jobs.values():
            counts[job_status(job)] += 1
        return {
            "drained": self.drained,
            "max_running_jobs": self.max_running_jobs or DEFAULT_MAX_RUNNING_JOBS,
            "running": len(self._slots),
            "counts": counts,
            "filters": len(self.filters),
        }

    # -- requests on one job ---------------------------------------------------------------

    def _job(self, job_id: int) -> Job:
        job = self.table.find(job_id)
        if job is None:
            raise errors.NotFound(f"job {job_id} not found")
        return job

    async def cancel(self, job_id: int, kill: bool) -> tuple[bool, str]:
        """cancel_job: the pure decision, made durable, then the signal to the process."""
        job = self._job(job_id)
        outcome = cancel_job(job, time.time(), kill)
        if outcome.job is not job:
            await self.table.commit([outcome.job])
            self._finished_maybe(outcome.job)
        if outcome.signal is not None and job.process_id is not None:
            self.procs.signal(self._key(job), _SIGNALS[outcome.signal])
        return outcome.ok, outcome.message

    async def change_priority(self, job_id: int, priority: int) -> tuple[bool, str]:
        """change_job_priority; a running job's process is told (SIGUSR1) to look."""
        job = self._job(job_id)
        outcome = change_priority(job, priority)
        if outcome.job is not job:
            await self.table.commit([outcome.job])
            self.request_pass()
        if outcome.notify and job.process_id is not None:
            self.procs.signal(self._key(job), signal.SIGUSR1)
        return outcome.ok, outcome.message

    async def archive(self, job_id: int) -> bool:
        """archive_job: finalized live jobs move to the archive (and out of memory)."""
        job = self._job(job_id)
        if job.archived or not is_finalized(job):
            return False
        done = await self.writer.run(lambda tx: tx.archive([job_id]))
        self._forget(done)
        return bool(done)

    async def auto_archive(self, age: float, timeout: float | None) -> tuple[int, int]:
        """auto_archive_jobs: archive in chunks until none is left or the time is up."""
        start = time.monotonic()
        cutoff = time.time() - age
        archived = 0
        while True:
            done, remaining = await self.writer.call(
                lambda store: store.auto_archive(cutoff, AUTO_ARCHIVE_CHUNK)
            )
            self._forget(done)
            archived += len(done)
            if not remaining or not done:
                return archived, remaining
            if timeout is not None and time.monotonic() - start >= timeout:
                return archived, remaining

    def _forget(self, ids: Iterable[int]) -> None:
        ids = list(ids)
        self.table.drop(ids)
        for job_id in ids:
            self.filters.forget(job_id)

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
            await self.table.commit([new])
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
                job = self.table.get(job_id)
                if job is not None:
                    self._finish(fail_job(job, time.time(), f"job process could not start: {exc}"))
                return
            job = self.table.get(job_id)
            if job is None or is_finalized(job):  # canceled while starting: it did nothing
                self.procs.signal(key, signal.SIGKILL)
                self._slots.discard(job_id)
                return
            await self.table.commit([start_job(job, time.time(), key.pid, key.start_time)])
            if not is_alive(key):  # died before its start was recorded
                self.process_exited(job_id, key)
        except errors.RpcError as exc:
            log.error("job %d: cannot record its start: %s", job_id, exc.message)
            self._slots.discard(job_id)
        finally:
            started.set_result(None)
            del self._starting[job_id]

    def _first_directive(self, job_id: int) -> Directive | None:
        job = self.table.get(job_id)
        return None if job is None else first_directive(job, time.time())

    def process_exited(self, job_id: int, key: ProcessKey) -> None:
        """A job process is gone: its job fails unless finalized (or paused between ops)."""
        job = self.table.get(job_id)
        if job is None or job.process_id != key.pid:
            return
        new = process_exited(job, time.time())
        if new is job:  # finalized before its process ended: its slot is free already
            return
        self._slots.discard(job_id)
        if not is_finalized(new):
            log.info("job %d: paused; its process %d ended", job_id, key.pid)
        else:
            log.warning("job %d: its process %d died", job_id, key.pid)
        self._finish(new)
        self.request_pass()

    def _finish(self, job: Job) -> None:
        """Commit a job that the shell finalized (in the background) and reschedule."""
        self.table.commit_soon([job])
        self._finished_maybe(job)

    def _finished_maybe(self, job: Job) -> bool:
        """Release the slot of a finalized job and reschedule; True if it is finalized."""
        if not is_finalized(job):
            return False
        self._slots.discard(job.id)
        self._unfinished.discard(job.id)
        self.filters.forget(job.id)
        self.request_pass()
        return True

    # -- scheduling ------------------------------------------------------------------------

    def request_pass(self, new: Iterable[int] | None = None) -> None:
        """Ask for a scheduling pass: of `new` jobs only, or a full one.

        Requests are served in this turn of the loop, one pass for all of them; a full
        pass comes at the earliest `_pass_gap` after the previous full one, so that
        under a stream of events (jobs ending one by one) long queues are examined a
        bounded number of times per second, each pass serving every event since.
        """
        if new is None:
            self._pass_full = True
        else:
            self._pass_new.update(new)
        if self._pass_handle is None:
            loop = asyncio.get_running_loop()
            wait = self._last_full_pass + self._pass_gap - loop.time() if new is None else 0
            if wait > 0:
                self._pass_handle = loop.call_later(wait, self._run_pass)
            else:
                self._pass_handle = loop.call_soon(self._run_pass)

    def _place_new_jobs(self) -> None:
        """Run the pass over just-submitted jobs now, so that a submit is answered only
        once its jobs have started or have their pending_reason (SPEC §6.1)."""
        max_running = self.max_running_jobs
        if max_running is None or not self._pass_new:
            return
        new, self._pass_new = self._pass_new, set()
        self._select(False, new, max_running)

    def _run_pass(self) -> None:
        self._pass_handle = None
        max_running = self.max_running_jobs
        if max_running is None:
            return
        full, new = self._pass_full, self._pass_new
        self._pass_full, self._pass_new = False, set()
        if not full:
            self._select(False, new, max_running)
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        self._select(True, new, max_running)
        self._last_full_pass = loop.time()
        self._pass_gap = min(MAX_PASS_GAP, max(MIN_PASS_GAP, self._last_full_pass - started))

    def _select(self, full: bool, new: set[int], max_running: int) -> None:
        """One pass: the pure selection over the queued and running jobs, then apply it."""
        jobs = self.table.jobs
        running: list[Job] = []
        for job_id in list(self._slots):
            job = jobs.get(job_id)
            if job is None or is_finalized(job):
                self._slots.discard(job_id)
            else:
                running.append(job)
        candidates = self._unfinished if full else new & self._unfinished
        queued = []
        for job_id in sorted(candidates):
            job = jobs.get(job_id)
            if job is None or is_finalized(job):
                self._unfinished.discard(job_id)
            elif job_id not in self._slots:
                queued.append(job)
        if not queued and not (full and running):
            return
        selection = select_jobs(
            queued,
            running,
            max_running,
            self.filters.verdict,
            self.filters.buckets,
            self.table.status_of,
        )
        self._apply(selection.start, selection.cancel, selection.fail, selection.pause,
                    selection.unpause, selection.pending)  # fmt: skip

    def _apply(
        self,
        start: list[int],
        cancel: list[tuple[int, str]],
        fail: list[tuple[int, str]],
        pause: list[int],
        unpause: list[int],
        pending: dict[int, str | None],
    ) -> None:
        """Carry out one pass's selection."""
        jobs = self.table.jobs
        now = time.time()
        changed: list[Job] = []
        for job_id, message in cancel:
            changed.append(mark_canceled(jobs[job_id], now, message))
        for job_id, message in fail:
            changed.append(fail_job(jobs[job_id], now, message))
        for job_id in pause:
            verdict = self.filters.verdict(jobs[job_id])
            reason = paused_reason(verdict.rule_uuid) if verdict is not None else None
            changed.append(set_pending_reason(pause_job(jobs[job_id]), reason))
        for job_id in unpause:
            if active_op_index(jobs[job_id]) is not None:  # not told to stop yet
                changed.append(set_pending_reason(unpause_job(jobs[job_id]), None))
        reasons = [
            set_pending_reason(jobs[job_id], reason)
            for job_id, reason in pending.items()
            if jobs[job_id].pending_reason != reason
        ]
        self.table.put(reasons)
        self.table.notify(job.id for job in reasons)
        self.table.commit_soon(changed)
        for job in changed:
            self._finished_maybe(job)
        for job_id in pause:
            job = jobs[job_id]
            if job.process_id is not None:  # in a lock wait it can stop now: tell it
                self.procs.signal(self._key(job), signal.SIGUSR1)
        for job_id in start:
            self._slots.add(job_id)
            self._background(self._start(job_id))

