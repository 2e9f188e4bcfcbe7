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

from luxid.filters.ratelimit import bucket_limit
from luxid.jobs.deps import StatusOf, check_dependencies
from luxid.jobs.model import FINALIZED, Job, job_priority, job_status
from luxid.verdict import Verdict

VerdictOf = Callable[[Job], Verdict | None]
BucketsOf = Callable[[Job], Iterable[str]]

REASON_MAX_RUNNING: Final = "max running jobs reached"


def reason_paused(rule_uuid: str) -> str:
    """Pending reason of a job a PAUSE rule applies to."""
    return f"paused by filter {rule_uuid}"


def reason_rate_limited(rule_uuid: str) -> str:
    """Pending reason of a job held by a full RATE_LIMIT rule."""
    return f"rate-limited by filter {rule_uuid}"


def reason_bucket_full(key: str) -> str:
    """Pending reason of a job whose reason-trail bucket is full."""
    return f"rate-limit bucket {key} full"


def reason_rejected(rule_uuid: str) -> str:
    """Result of a job a REJECT rule applies to (it is canceled)."""
    return f"rejected by filter {rule_uuid}"


def _key_set(keys: Iterable[str]) -> frozenset[str] | set[str]:
    return keys if isinstance(keys, set | frozenset) else set(keys)


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
    applies, its RATE_LIMIT rule already has n running jobs, one of its buckets already
    has n running jobs, or max_running_jobs are running — counting the jobs started
    earlier in this pass.
    """
    rule_running: dict[str, int] = {}
    bucket_running: dict[str, int] = {}
    pause: list[int] = []
    unpause: list[int] = []
    for job in running:
        verdict = verdict_of(job)
        finalized = job_status(job) in FINALIZED
        if verdict is not None:
            if verdict.action == "RATE_LIMIT":
                rule_running[verdict.rule_uuid] = rule_running.get(verdict.rule_uuid, 0) + 1
            elif verdict.action == "PAUSE" and not job.paused and not finalized:
                pause.append(job.id)
        if job.paused and not finalized and (verdict is None or verdict.action != "PAUSE"):
            unpause.append(job.id)
        for key in _key_set(buckets_of(job)):
            bucket_running[key] = bucket_running.get(key, 0) + 1

    cancel: list[tuple[int, str]] = []
    fail: list[tuple[int, str]] = []
    pending: dict[int, str | None] = {}
    candidates: list[tuple[int, int, Job, Verdict | None]] = []
    for job in queued:
        if job_status(job) in FINALIZED:
            continue
        verdict = verdict_of(job)
        if verdict is not None and verdict.action == "REJECT":
            cancel.append((job.id, reason_rejected(verdict.rule_uuid)))
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
            pending[job.id] = reason_paused(verdict.rule_uuid)
            continue
        candidates.append((job_priority(job), job.id, job, verdict))

    candidates.sort(key=lambda c: (c[0], c[1]))
    free_slots = max_running_jobs - len(running)
    start: list[int] = []
    for _prio, jid, job, verdict in candidates:
        rule = None
        if verdict is not None and verdict.action == "RATE_LIMIT":
            rule = verdict.rule_uuid
            if rule_running.get(rule, 0) >= verdict.rate_limit:
                pending[jid] = reason_rate_limited(rule)
                continue
        keys = _key_set(buckets_of(job))
        full = None
        for key in sorted(keys) if len(keys) > 1 else keys:
            if bucket_running.get(key, 0) >= bucket_limit(key):
                full = key
                break
        if full is not None:
            pending[jid] = reason_bucket_full(full)
            continue
        if free_slots <= 0:
            pending[jid] = REASON_MAX_RUNNING
            continue
        free_slots -= 1
        start.append(jid)
        pending[jid] = None
        if rule is not None:
            rule_running[rule] = rule_running.get(rule, 0) + 1
        for key in keys:
            bucket_running[key] = bucket_running.get(key, 0) + 1

    return Selection(
        start=start, cancel=cancel, fail=fail, pause=pause, unpause=unpause, pending=pending
    )
