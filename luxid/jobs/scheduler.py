"""The scheduler's selection step (SPEC §6.3, §6.4): which queued jobs start now (pure).

One pass, O(n log n) in the number of queued jobs (one sort, then one linear scan with
counters in dicts). The shell runs a pass on every event (submit, job end, filter/config
change, priority change, cancel) and applies the result: start processes, cancel or fail
jobs, pause/unpause running ones, record pending reasons.

Who is `running`: every job that holds a slot, i.e. has a live process (a paused job
whose process has not exited yet included); `queued`: non-finalized jobs without one
(paused jobs whose process exited included).

Differences from Ganeti's selectJobsToRun (ganeti-luxid.md §5), all deliberate:
- a job held back by a filter or the slot limit does not take a reason-bucket slot
  (Ganeti counted it: "ad-hoc slots can be used by filtered-out jobs");
- PAUSE applies to running jobs too: they are listed in `pause` (SPEC §6.3);
- unsatisfiable dependencies cancel or fail the job here instead of in its process.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Final

import msgspec

from luxid.filters.ratelimit import Admission, paused_reason, rejected_result
from luxid.filters.verdict import Verdict
from luxid.jobs.deps import StatusOf, check_dependencies
from luxid.jobs.model import FINALIZED, Job, job_priority, job_status

VerdictOf = Callable[[Job], Verdict | None]
BucketsOf = Callable[[Job], Iterable[str]]

REASON_MAX_RUNNING: Final = "max running jobs reached"


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
    """

    start: list[int]
    cancel: list[tuple[int, str]]
    fail: list[tuple[int, str]]
    pause: list[int]
    unpause: list[int]
    pending: dict[int, str | None]


def select_jobs(
    queued: Iterable[Job],
    running: Sequence[Job],
    max_running_jobs: int,
    verdict_of: VerdictOf,
    buckets_of: BucketsOf,
    status_of: StatusOf,
) -> Selection:
    """Run one selection pass.

    `verdict_of(job)` is the applying filter rule's verdict (None: no rule applies), asked
    for queued and running jobs alike (Ganeti re-evaluates RATE_LIMIT slots for running
    jobs at every pass). `buckets_of(job)` gives its reason-trail buckets "<n>:<label>"
    (see `luxid.jobs.deps.reason_buckets`). `status_of(id)` gives any job's status,
    archived ones included, None if unknown (for dependencies).

    Eligible jobs are taken in (priority, id) order; each starts unless a PAUSE rule
    applies, one of its buckets already has n running jobs, its RATE_LIMIT rule already
    has n running jobs, or max_running_jobs are running — counting the jobs started
    earlier in this pass (slot accounting: luxid.filters.ratelimit.Admission).
    """
    slots = Admission()
    pause: list[int] = []
    unpause: list[int] = []
    for job in running:
        verdict = verdict_of(job)
        finalized = job_status(job) in FINALIZED
        if verdict is not None and verdict.action == "PAUSE" and not job.paused and not finalized:
            pause.append(job.id)
        if job.paused and not finalized and (verdict is None or verdict.action != "PAUSE"):
            unpause.append(job.id)
        slots.occupy(verdict, buckets_of(job))

    cancel: list[tuple[int, str]] = []
    fail: list[tuple[int, str]] = []
    pending: dict[int, str | None] = {}
    candidates: list[tuple[int, int, Job, Verdict | None]] = []
    for job in queued:
        if job_status(job) in FINALIZED:
            continue
        verdict = verdict_of(job)
        if verdict is not None and verdict.action == "REJECT":
            cancel.append((job.id, rejected_result(verdict.rule_uuid)))
            continue
        if job.depends:
            dep = check_dependencies(job, status_of)
            if dep.action == "wait":
                pending[job.id] = dep.message
                continue
            if dep.action == "cancel":
                cancel.append((job.id, dep.message))
                continue
            if dep.action == "fail":
                fail.append((job.id, dep.message))
                continue
        if verdict is not None and verdict.action == "PAUSE":
            pending[job.id] = paused_reason(verdict.rule_uuid)
            continue
        candidates.append((job_priority(job), job.id, job, verdict))

    candidates.sort(key=lambda c: (c[0], c[1]))
    free_slots = max_running_jobs - len(running)
    start: list[int] = []
    for _prio, jid, job, verdict in candidates:
        buckets = tuple(buckets_of(job))
        reason = slots.hold_reason(verdict, buckets)
        if reason is None and free_slots <= 0:
            reason = REASON_MAX_RUNNING
        pending[jid] = reason
        if reason is None:
            free_slots -= 1
            start.append(jid)
            slots.occupy(verdict, buckets)

    return Selection(
        start=start, cancel=cancel, fail=fail, pause=pause, unpause=unpause, pending=pending
    )
