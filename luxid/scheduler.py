"""When scheduling passes run, and what the shell does with their selection
(docs/contracts.md#scheduling-and-job-processes).

Scheduling is event-driven: a submit, a job's end or process exit, a filter or config
change, a priority change or a cancel requests a pass; requests made in one turn of the
loop are served by one pass.  A pass after submits only (nothing else changed) examines
only the new jobs: earlier queued jobs were held for reasons new jobs cannot remove, so
their decisions stand.  A pass after running jobs ended (nothing else changed) fills the
freed slots: it examines queued jobs in (priority, id) order only until no slot is left
(`luxid.jobs.fill_free_slots`), a handful of jobs instead of the whole queue at every job
end.  The decisions themselves are pure (`luxid.jobs.select_jobs`, `fill_free_slots`),
with the verdicts of luxid.active_filters; this module applies them to the live jobs.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from collections.abc import Set as AbstractSet

from luxid.active_filters import ActiveFilters
from luxid.budgets import EMPTY_BOOK, BudgetBook, BudgetCount, DisruptionMemo
from luxid.filters.ratelimit import paused_reason
from luxid.filters.verdict import Hold
from luxid.jobs import (
    Job,
    Selection,
    active_op_index,
    fail_job,
    fill_free_slots,
    hold_of,
    is_finalized,
    mark_canceled,
    pause_job,
    queue_order,
    select_jobs,
    set_pending_reason,
    unpause_job,
)
from luxid.jobs.deps import StatusOf
from luxid.jobs.selection import BucketsOf, VerdictOf
from luxid.live_jobs import LiveJobs

Select = Callable[
    [Iterable[Job], list[Job], int, VerdictOf, BucketsOf, StatusOf, BudgetCount | None],
    Selection,
]
"""`select_jobs` or `fill_free_slots`."""

# Bounds of the gap between two full scheduling passes (see Scheduler.request_pass): the
# gap is the last pass's duration, so passes take at most half of the event loop's time.
MIN_PASS_GAP, MAX_PASS_GAP = 0.003, 0.05


class Scheduler:
    """Runs passes over the live jobs and carries out their selection.

    The scheduler owns the two sets its passes work on, and the queue changes them by
    plain calls:

    - the slots, the jobs holding one (a process, or one being started): a pass takes a
      slot for each job it starts; the queue hands one over for a reattached process
      (`take_slot`) and gives it back when a job's process ends or its start fails
      (`release_slot`);
    - the unfinished jobs (ids of non-finalized live jobs), the candidates of a pass: the
      queue adds submitted ones (`jobs_added`) and removes finalized ones with their slot
      (`job_finalized`); a pass drops those it finds gone.

    The queue is told through three callbacks: `start(job_id)` (a slot is taken: start its
    process), `pause(job)` (tell the job's process to look: a PAUSE rule applies), and
    `finished(job)` (a job the pass finalized); the budgets through `on_exceeded(starts)`
    (jobs started past a disruption budget: (budget, job id, event)).

    The disruption budgets a pass judges by are `budgets` (luxid.budgets.BudgetBook), set
    by the queue whenever the configuration's budgets or instances change.
    """

    def __init__(
        self,
        live: LiveJobs,
        filters: ActiveFilters,
        start: Callable[[int], None],
        pause: Callable[[Job], None],
        finished: Callable[[Job], object],
    ) -> None:
        self.live = live
        self.filters = filters
        self.budgets: BudgetBook = EMPTY_BOOK
        self._disruptions = DisruptionMemo()  # each unfinished job's, for the budgets
        self.on_exceeded: Callable[[list[tuple[str, int, str]]], object] | None = None
        self._slots: set[int] = set()
        self._unfinished: set[int] = {j.id for j in live.jobs.values() if not is_finalized(j)}
        self._start = start
        self._pause = pause
        self._finished = finished
        # None until the configuration was read: nothing is started before that, so no
        # job slips past a filter luxid does not know yet.
        self.max_running_jobs: int | None = None
        self._full = False
        self._fill = False
        self._new: set[int] = set()
        # The queued jobs' ids in (priority, id) order for fill passes, kept between them;
        # None once anything but a job end asked for a pass (see _in_queue_order).
        self._order: deque[int] | None = None
        self._handle: asyncio.Handle | None = None
        self._last_full_pass = 0.0
        self._gap = MIN_PASS_GAP

    # -- slots ---------------------------------------------------------------------------

    @property
    def slots_taken(self) -> int:
        """How many jobs hold a slot (query_queue_info's `running`), judged as a pass
        judges (`_running`): a finalized job's slot is free, even in the moment between
        its status changing and the queue letting go of the slot (a job's last report
        is in memory while it is made durable)."""
        return sum(1 for job_id in self._slots if self._holder(job_id) is not None)

    def take_slot(self, job_id: int) -> None:
        """A job holds a slot without a pass having started it (its process survived
        luxid and was reattached)."""
        self._slots.add(job_id)

    def release_slot(self, job_id: int) -> bool:
        """The job no longer holds a slot; True if it held one.  Requests no pass: the
        caller says what the freed slot means (`slot_freed`, `request_pass`)."""
        held = job_id in self._slots
        self._slots.discard(job_id)
        return held

    def running(self) -> list[Job]:
        """The jobs holding a slot now (what a pass counts as running)."""
        return self._running()

    def hold_of(self, job: Job, running: list[Job]) -> Hold | None:
        """What holds a queued job back, decided as a pass decides it, over `running`
        (`running()`) with the current filters; None until the configuration was read,
        when nothing starts yet."""
        max_running = self.max_running_jobs
        if max_running is None:
            return None
        filters = self.filters
        return hold_of(
            job, running, max_running, filters.verdict, filters.buckets, self.live.status_of,
            self.budget_count(running),
        )  # fmt: skip

    def budget_count(self, running: list[Job]) -> BudgetCount | None:
        """The budgets' disrupted members over `running` (`running()`); None without
        budgets."""
        return BudgetCount(self.budgets, running, self._disruptions) if self.budgets else None

    # -- unfinished jobs -----------------------------------------------------------------

    @property
    def unfinished(self) -> AbstractSet[int]:
        """The ids of the non-finalized live jobs (finalized ones may linger until a pass
        or `job_finalized` drops them)."""
        return self._unfinished

    def jobs_added(self, ids: Iterable[int]) -> None:
        """New unfinished jobs were stored (a submit); `request_pass` examines them."""
        self._unfinished.update(ids)

    def job_finalized(self, job_id: int) -> bool:
        """A job was finalized: it is no candidate any more and lets go of its slot; True
        if it held one.  Requests no pass (see `release_slot`)."""
        self._drop(job_id)
        return self.release_slot(job_id)

    # -- passes --------------------------------------------------------------------------

    def request_pass(self, new: Iterable[int] | None = None) -> None:
        """Ask for a scheduling pass: of `new` jobs only, or a full one.

        Requests are served in this turn of the loop, one pass for all of them; a full
        pass comes at the earliest `_gap` after the previous full one, so that under a
        stream of events (jobs ending one by one) long queues are examined a bounded
        number of times per second, each pass serving every event since.
        """
        if new is None:
            self._full = True
            self._order = None
        else:
            before = len(self._new)
            self._new.update(new)
            if len(self._new) != before:
                self._order = None
        if self._handle is None:
            loop = asyncio.get_running_loop()
            wait = self._last_full_pass + self._gap - loop.time() if new is None else 0
            if wait > 0:
                self._handle = loop.call_later(wait, self._run_pass)
            else:
                self._handle = loop.call_soon(self._run_pass)

    def slot_freed(self, dependents: Iterable[int] = ()) -> None:
        """A job that held a slot ended, nothing else changed: fill the free slots (and
        examine the jobs that waited for that job), in this turn of the loop."""
        self._fill = True
        self.request_pass(new=dependents)

    def cancel(self) -> None:
        """No more passes (luxid stops)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def place_new_jobs(self) -> None:
        """Run the pass over just-submitted jobs now, so that a submit is answered only
        once its jobs have started or have their pending_reason
        (docs/contracts.md#job-model)."""
        max_running = self.max_running_jobs
        if max_running is None or not self._new:
            return
        new, self._new = self._new, set()
        self._select(False, new, max_running)

    def _run_pass(self) -> None:
        self._handle = None
        max_running = self.max_running_jobs
        if max_running is None:
            return
        full, fill, new = self._full, self._fill, self._new
        self._full, self._fill, self._new = False, False, set()
        if not full:
            if fill:
                self._fill_slots(max_running)
            if new:
                self._select(False, new, max_running)
            return
        loop = asyncio.get_running_loop()
        started = loop.time()
        self._select(True, new, max_running)
        self._last_full_pass = loop.time()
        self._gap = min(MAX_PASS_GAP, max(MIN_PASS_GAP, self._last_full_pass - started))

    def _running(self) -> list[Job]:
        """The jobs holding a slot (finalized ones let go of theirs)."""
        running: list[Job] = []
        for job_id in list(self._slots):
            job = self._holder(job_id)
            if job is None:
                self._slots.discard(job_id)
            else:
                running.append(job)
        return running

    def _holder(self, job_id: int) -> Job | None:
        """The job of a slot while it still holds it: live and not finalized."""
        job = self.live.jobs.get(job_id)
        return None if job is None or is_finalized(job) else job

    def _queued(self, candidates: Iterable[int]) -> list[Job]:
        """The live jobs among `candidates` that hold no slot, by id (a finalized one
        among them, the selection reports and `_apply` drops: one status test per job)."""
        jobs = self.live.jobs
        queued = []
        for job_id in sorted(candidates):
            job = jobs.get(job_id)
            if job is None:
                self._drop(job_id)
            elif job_id not in self._slots:
                queued.append(job)
        return queued

    def _drop(self, job_id: int) -> None:
        """A candidate found gone or finalized is no candidate any more."""
        self._unfinished.discard(job_id)
        self._disruptions.forget(job_id)

    def _fill_slots(self, max_running: int) -> None:
        """The pass after job ends: start the next eligible jobs into the free slots."""
        running = self._running()
        if len(running) < max_running:
            self._decide(fill_free_slots, self._in_queue_order(), running, max_running)

    def _in_queue_order(self) -> Iterator[Job]:
        """The queued jobs in (priority, id) order, lazily, for a fill pass.

        The order is sorted once and kept while only job ends happen (they change no
        priority and add no job); every other request for a pass drops it.  Finished
        jobs at its head are dropped for good, running ones (at most max_running) are
        skipped, so a fill pass costs what it examines, not the length of the queue.
        """
        if self._order is None:
            ordered = sorted(self._queued(self._unfinished), key=queue_order)
            self._order = deque(job.id for job in ordered)
        order, jobs = self._order, self.live.jobs
        while order and order[0] not in self._unfinished:
            order.popleft()
        for job_id in order:
            if job_id in self._slots or job_id not in self._unfinished:
                continue
            job = jobs.get(job_id)
            if job is not None and not is_finalized(job):
                yield job

    def _select(self, full: bool, new: set[int], max_running: int) -> None:
        """One pass: the pure selection over the queued and running jobs, then apply it."""
        running = self._running()
        queued = self._queued(self._unfinished if full else new & self._unfinished)
        if not queued and not (full and running):
            return
        self._decide(select_jobs, queued, running, max_running)

    def _decide(
        self, select: Select, queued: Iterable[Job], running: list[Job], max_running: int
    ) -> None:
        """Run the pure selection `select` with the current filters, then apply it."""
        verdict, buckets = self.filters.verdict, self.filters.buckets
        budgets = self.budget_count(running)
        self._apply(
            select(queued, running, max_running, verdict, buckets, self.live.status_of, budgets)
        )

    def _apply(self, selection: Selection) -> None:
        """Carry out one pass's selection."""
        start, pause, pending = selection.start, selection.pause, selection.pending
        jobs = self.live.jobs
        now = time.time()
        for job_id in selection.finalized:
            self._drop(job_id)
        changed: list[Job] = []
        for job_id, message in selection.cancel:
            changed.append(mark_canceled(jobs[job_id], now, message))
        for job_id, message in selection.fail:
            changed.append(fail_job(jobs[job_id], now, message))
        for job_id in pause:
            verdict = self.filters.verdict(jobs[job_id])
            reason = paused_reason(verdict.rule_uuid) if verdict is not None else None
            changed.append(set_pending_reason(pause_job(jobs[job_id]), reason))
        for job_id in selection.unpause:
            if active_op_index(jobs[job_id]) is not None:  # not told to stop yet
                changed.append(set_pending_reason(unpause_job(jobs[job_id]), None))
        reasons = [
            set_pending_reason(jobs[job_id], reason)
            for job_id, reason in pending.items()
            if jobs[job_id].pending_reason != reason
        ]
        self.live.put(reasons)
        self.live.notify(job.id for job in reasons)
        self.live.commit_soon(changed)
        for job in changed:
            self._finished(job)
        for job_id in pause:
            self._pause(jobs[job_id])
        if selection.exceeded and self.on_exceeded is not None:
            self.on_exceeded(selection.exceeded)
        for job_id in start:
            self._slots.add(job_id)
            self._start(job_id)
