"""The scheduler's selection step (docs/contracts.md#scheduling-and-job-processes): which
queued jobs start now (pure).

One pass, O(n log n) in the number of queued jobs (one sort, then one linear scan with
counters in dicts). The shell, luxid.scheduler.Scheduler, runs a pass on every event
(submit, job end, filter/config change, priority change, cancel) and applies the result:
start processes, cancel or fail jobs, pause/unpause running ones, record pending reasons.

Who is `running`: every job that holds a slot, i.e. has a live process (a paused job
whose process has not exited yet included); `queued`: non-finalized jobs without one
(paused jobs whose process exited included).

Differences from Ganeti's selectJobsToRun (JQScheduler.hs), all deliberate:
- a job held back by a filter or the slot limit does not take a reason-bucket slot
  (Ganeti counted it: "ad-hoc slots can be used by filtered-out jobs");
- PAUSE applies to running jobs too: they are listed in `pause` (docs/contracts.md#filters);
- unsatisfiable dependencies cancel or fail the job here instead of in its process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from luxid.filters.ratelimit import Admission, paused_reason, rejected_result
from luxid.filters.verdict import Hold, Verdict
from luxid.jobs.deps import StatusOf, check_dependencies
from luxid.jobs.model import FINALIZED, Job, job_priority, job_status

if TYPE_CHECKING:
    from luxid.budgets import BudgetCount

VerdictOf = Callable[[Job], Verdict | None]
BucketsOf = Callable[[Job], Iterable[str]]

REASON_MAX_RUNNING: Final = "max running jobs reached"
HOLD_MAX_RUNNING: Final = Hold("slots", REASON_MAX_RUNNING)


class Selection(msgspec.Struct, frozen=True):
    """What one scheduling pass decided.

    - `start`: job ids to start now, in start order ((priority, id) order).
    - `cancel`: `(id, message)` of queued jobs to cancel: REJECT ("rejected by filter
      <uuid>") or a dependency that was canceled (apply `mark_canceled(job, now, message)`).
    - `fail`: `(id, message)` of queued jobs whose dependencies can never be met
      (apply `fail_job(job, now, message)`).
    - `pause`: running jobs a PAUSE rule applies to and that are not paused yet.
    - `unpause`: running jobs flagged paused that no PAUSE rule applies to any more.
    - `pending`: for every other queued job, its pending reason; None for started ones.
    - `exceeded`: (budget, job id, event) for each start past a disruption budget (a job
      with `ignore_budgets`, or a drain's move at its deadline).
    - `finalized`: the jobs among `queued` that were finalized already (left alone; the
      caller may stop offering them).
    """

    start: list[int]
    cancel: list[tuple[int, str]]
    fail: list[tuple[int, str]]
    pause: list[int]
    unpause: list[int]
    pending: dict[int, str | None]
    exceeded: list[tuple[str, int, str]] = []
    finalized: list[int] = []


def select_jobs(
    queued: Iterable[Job],
    running: Sequence[Job],
    max_running_jobs: int,
    verdict_of: VerdictOf,
    buckets_of: BucketsOf,
    status_of: StatusOf,
    budgets: BudgetCount | None = None,
) -> Selection:
    """Run one selection pass.

    `verdict_of(job)` is the applying filter rule's verdict (None: no rule applies), asked
    for queued and running jobs alike (Ganeti re-evaluates RATE_LIMIT slots for running
    jobs at every pass). `buckets_of(job)` gives its reason-trail buckets "<n>:<label>"
    (see `luxid.jobs.deps.reason_buckets`). `status_of(id)` gives any job's status,
    archived ones included, None if unknown (for dependencies).

    Eligible jobs are taken in (priority, id) order; each starts unless a PAUSE rule
    applies, one of its buckets already has n running jobs, its RATE_LIMIT rule already
    has n running jobs, a disruption budget holds it (`budgets`, the disrupted members
    counted over `running`), or max_running_jobs are running — counting the jobs started
    earlier in this pass (slot accounting: luxid.filters.ratelimit.Admission).
    """
    pass_ = _Pass(running, max_running_jobs, verdict_of, buckets_of, budgets)
    candidates: list[tuple[int, int, Job, Verdict | None]] = []
    classify, append = pass_.classify, candidates.append
    for job in queued:
        eligible, verdict = classify(job, status_of)
        if eligible:
            append((job_priority(job), job.id, job, verdict))
    candidates.sort()  # by (priority, id): unique, so the job is never compared
    for _prio, _jid, job, verdict in candidates:
        pass_.admit(job, verdict)
    return pass_.selection()


def fill_free_slots(
    queued_in_order: Iterable[Job],
    running: Sequence[Job],
    max_running_jobs: int,
    verdict_of: VerdictOf,
    buckets_of: BucketsOf,
    status_of: StatusOf,
    budgets: BudgetCount | None = None,
) -> Selection:
    """The pass after a running job ended and nothing else changed: fill the free slots.

    `queued_in_order` must be in (priority, id) order (`queue_order`).  Jobs are examined
    as `select_jobs` does, but only until no slot is left: every later job could not
    start in this pass anyway, and the event that ended a job changed nothing else about
    it (filter, configuration, priority and dependency events ask for a full pass or
    name the jobs they concern).  So the jobs started are exactly those a full pass
    would start; the pending reasons of the jobs not examined stay as recorded.  With
    600 queued jobs this examines a handful instead of all of them.
    """
    pass_ = _Pass(running, max_running_jobs, verdict_of, buckets_of, budgets)
    for job in queued_in_order:
        if pass_.free_slots <= 0:
            break
        eligible, verdict = pass_.classify(job, status_of)
        if eligible:
            pass_.admit(job, verdict)
    return pass_.selection()


def hold_of(
    job: Job,
    running: Sequence[Job],
    max_running_jobs: int,
    verdict_of: VerdictOf,
    buckets_of: BucketsOf,
    status_of: StatusOf,
    budgets: BudgetCount | None = None,
) -> Hold | None:
    """What holds one queued job back now, decided as a pass decides it (the same
    `_Pass` steps, over the same running jobs): None if it would start, or is not waiting
    for anything (finalized, or about to be canceled or failed).

    The pass examined alone: queued jobs ahead of it that a pending pass would start first
    are not counted (they hold no slot yet), so between a change and the pass that follows
    it a job may show as free that the pass then holds for `slots`.
    """
    pass_ = _Pass(running, max_running_jobs, verdict_of, buckets_of, budgets)
    eligible, verdict = pass_.classify(job, status_of)
    if eligible:
        pass_.admit(job, verdict)
    return pass_.holds.get(job.id)


def queue_order(job: Job) -> tuple[int, int]:
    """The key of the order in which queued jobs are considered: (priority, id)."""
    return job_priority(job), job.id


class _Pass:
    """The bookkeeping of one pass: slots taken, and what it decided so far."""

    def __init__(
        self,
        running: Sequence[Job],
        max_running_jobs: int,
        verdict_of: VerdictOf,
        buckets_of: BucketsOf,
        budgets: BudgetCount | None,
    ) -> None:
        self.verdict_of = verdict_of
        self.buckets_of = buckets_of
        self.budgets = budgets
        self.exceeded: list[tuple[str, int, str]] = []
        self.slots = Admission()
        self.pause: list[int] = []
        self.unpause: list[int] = []
        for job in running:
            verdict = verdict_of(job)
            finalized = job_status(job) in FINALIZED
            paused_by_rule = verdict is not None and verdict.action == "PAUSE"
            if paused_by_rule and not job.paused and not finalized:
                self.pause.append(job.id)
            if job.paused and not finalized and not paused_by_rule:
                self.unpause.append(job.id)
            self.slots.occupy(verdict, buckets_of(job))
        self.free_slots = max_running_jobs - len(running)
        self.start: list[int] = []
        self.cancel: list[tuple[int, str]] = []
        self.fail: list[tuple[int, str]] = []
        self.pending: dict[int, str | None] = {}
        self.finalized: list[int] = []
        self.holds: dict[int, Hold] = {}  # what `pending`'s reasons say, for why_job
        self._paused: dict[str, Hold] = {}  # one Hold per PAUSE rule (most jobs share a few)

    def hold(self, job_id: int, held: Hold) -> None:
        """Record why a queued job does not start in this pass."""
        self.pending[job_id] = held.reason
        self.holds[job_id] = held

    def classify(self, job: Job, status_of: StatusOf) -> tuple[bool, Verdict | None]:
        """Whether a queued job may compete for a slot (else its fate is recorded), and
        its verdict."""
        if job_status(job) in FINALIZED:
            self.finalized.append(job.id)
            return False, None
        verdict = self.verdict_of(job)
        if verdict is not None and verdict.action == "REJECT":
            self.cancel.append((job.id, rejected_result(verdict.rule_uuid)))
            return False, verdict
        if job.depends:
            dep = check_dependencies(job, status_of)
            if dep.action == "wait":
                self.hold(job.id, Hold("dependency", dep.message, job_id=dep.job_id or 0))
                return False, verdict
            if dep.action == "cancel":
                self.cancel.append((job.id, dep.message))
                return False, verdict
            if dep.action == "fail":
                self.fail.append((job.id, dep.message))
                return False, verdict
        if verdict is not None and verdict.action == "PAUSE":
            uuid = verdict.rule_uuid
            held = self._paused.get(uuid)
            if held is None:
                held = self._paused[uuid] = Hold("paused", paused_reason(uuid), key=uuid)
            self.hold(job.id, held)
            return False, verdict
        return True, verdict

    def admit(self, job: Job, verdict: Verdict | None) -> None:
        """Start an eligible job if its rule, its buckets and the slot limit allow."""
        buckets = tuple(self.buckets_of(job))
        held = self.slots.hold(verdict, buckets)
        budgets = self.budgets
        if held is None and budgets is not None:
            held = budgets.hold(job)
        if held is None and self.free_slots <= 0:
            held = HOLD_MAX_RUNNING
        if held is not None:
            self.hold(job.id, held)
            return
        self.pending[job.id] = None
        self.free_slots -= 1
        self.start.append(job.id)
        self.slots.occupy(verdict, buckets)
        if budgets is not None:
            self.exceeded.extend((name, job.id, event) for name, event in budgets.start(job))

    def selection(self) -> Selection:
        return Selection(
            start=self.start, cancel=self.cancel, fail=self.fail, pause=self.pause,
            unpause=self.unpause, pending=self.pending, exceeded=self.exceeded,
            finalized=self.finalized,
        )  # fmt: skip
