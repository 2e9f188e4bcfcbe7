"""Why a job waits: the chain of `why_job` (docs/contracts.md#why-a-job-waits), pure.

From a job to what holds it, one Step per link, at most `MAX_LINKS`:

- a queued job (no slot): the scheduler's own decision for it (`Situation.hold_of`, the
  selection pass's `hold_of`) says what holds it — a filter rule (the queue drain's rule
  gives a `drain_flag` Step instead), a full RATE_LIMIT rule or reason bucket, the slots,
  or a job it depends on, whose own chain follows;
- a job with a slot (its process started): the locks its process waits for, from
  wconfd's `lock_waits`; the first holder that is a job goes on with that job's chain, a
  holder that is no job but waits itself goes on with its own lock wait;
- a job met again closes a wait-for cycle: a `cycle` Step, and the chain ends.

Nothing here reads a clock or a socket: `Situation` carries what the shell gathered.
When the chain reaches a lock wait and the shell did not fetch `lock_waits` yet, `LocksNeeded`
is raised, so a chain that never reaches a lock costs no call to wconfd.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Final, Literal

from client.api.wconfd import LockHolder, LockWait
from client.api.why import (
    BudgetStep,
    CycleStep,
    DependencyStep,
    DrainFlagStep,
    FilterStep,
    LockStep,
    RateLimitStep,
    SlotsStep,
    Step,
    WhyJob,
)
from luxid.filters.ratelimit import bucket_limit
from luxid.filters.verdict import Hold, Verdict
from luxid.jobs.fields import op_subject
from luxid.jobs.model import FINALIZED, Job, active_op_index, job_status, next_op_index
from luxid.jobs.selection import BucketsOf, VerdictOf

MAX_LINKS: Final = 8
SHOWN_HOLDERS: Final = 3  # holders named in a lock Step's text; the rest are counted
SHOWN_RUNNING: Final = 5  # running jobs named in a rate_limit Step's text


class LocksNeeded(Exception):
    """The chain reached a lock wait: fetch wconfd's lock_waits and build it again."""


@dataclass(frozen=True)
class QueueDrainRule:
    """The queue drain's filter rule: a job it holds gets a `drain_flag` Step."""

    uuid: str
    mode: Literal["soft", "hard"]


@dataclass(frozen=True)
class Situation:
    """What a chain is judged by, gathered by the shell at one moment `now`.

    `hold_of` is the scheduler's decision for a queued job (luxid.jobs.selection.hold_of
    over the scheduler's running jobs), so a job shown held by a rule is held by it;
    `running` are the jobs holding a slot, `verdict_of`/`buckets_of` the filters' view
    of a job; `lock_waits` is None until fetched; `budget_disrupted(name)` the disrupted
    members of a budget, [instance, why].
    """

    now: float
    job: Callable[[int], Job | None]
    hold_of: Callable[[Job], Hold | None]
    running: Sequence[Job]
    max_running_jobs: int
    verdict_of: VerdictOf
    buckets_of: BucketsOf
    queue_drain: QueueDrainRule | None = None
    lock_waits: Sequence[LockWait] | None = None
    budget_disrupted: Callable[[str], Sequence[tuple[str, str]]] = lambda name: ()


def why_job(job: Job, situation: Situation) -> WhyJob:
    """The whole answer for `job` (LocksNeeded if it needs `lock_waits`)."""
    return WhyJob(job_id=job.id, status=job_status(job), chain=_Walk(situation).chain(job))


def describe_job(job: Job, now: float) -> str:
    """`job 37 (running OP_INSTANCE_MIGRATE web1 for 12 s)`: its status, the opcode it is
    at and for how long it has been in that status."""
    status = job_status(job)
    index = active_op_index(job)
    if index is None:
        index = next_op_index(job)
    what = ""
    began = job.received_ts if status == "queued" else job.start_ts
    if index is not None:
        op = job.ops[index]
        subject = op_subject(op.input)
        what = f" {op.op_id}" + (f" {subject}" if subject is not None else "")
        if status != "queued" and op.start_ts is not None:
            began = op.start_ts
    if began is None:
        began = job.received_ts
    return f"job {job.id} ({status}{what} for {_seconds(now - began)})"


def _seconds(duration: float) -> str:
    return f"{max(0, round(duration))} s"


def _ids(ids: Sequence[int]) -> str:
    shown = ", ".join(str(i) for i in ids[:SHOWN_RUNNING])
    return shown + (f" and {len(ids) - SHOWN_RUNNING} more" if len(ids) > SHOWN_RUNNING else "")


class _Walk:
    """One chain being built: the Steps so far and the jobs and clients passed."""

    def __init__(self, situation: Situation) -> None:
        self.s = situation
        self.steps: list[Step] = []
        self.path: list[int] = []  # the jobs the chain passed, in order
        self.clients: set[str] = set()  # the non-job clients it passed
        self.slotted = {job.id for job in situation.running}

    def chain(self, job: Job) -> list[Step]:
        self._job(job)
        return self.steps[:MAX_LINKS]

    def _full(self) -> bool:
        return len(self.steps) >= MAX_LINKS

    def _add(self, step: Step) -> None:
        self.steps.append(step)

    # -- from a job -----------------------------------------------------------------

    def _job(self, job: Job) -> None:
        if self._full():
            return
        if job.id in self.path:
            ids = [*self.path[self.path.index(job.id) :], job.id]
            text = "wait-for cycle: " + " -> ".join(f"job {i}" for i in ids)
            self._add(CycleStep(text=text, job_ids=ids))
            return
        self.path.append(job.id)
        if job_status(job) in FINALIZED:
            return
        if job.id in self.slotted:
            self._lock_waits(_of_job(job.id))
            return
        hold = self.s.hold_of(job)
        if hold is not None:
            self._hold(job, hold)

    def _hold(self, job: Job, hold: Hold) -> None:
        s = self.s
        if hold.kind == "dependency":
            dep = s.job(hold.job_id)
            if dep is None:  # archived or gone meanwhile: it holds nothing any more
                self._add(DependencyStep(hold.reason, hold.job_id, "unknown"))
                return
            text = f"waiting for {describe_job(dep, s.now)}"
            self._add(DependencyStep(text=text, job_id=dep.id, status=job_status(dep)))
            self._job(dep)
        elif hold.kind in ("paused", "rejected"):
            drain = s.queue_drain
            if drain is not None and drain.uuid == hold.key:
                text = f"held by the {drain.mode} queue drain (filter {hold.key}) until undrained"
                self._add(DrainFlagStep(text=text, target="queue", mode=drain.mode))
            else:
                action = "PAUSE" if hold.kind == "paused" else "REJECT"
                self._add(FilterStep(text=hold.reason, uuid=hold.key, action=action))
        elif hold.kind == "bucket":
            running = [j.id for j in s.running if hold.key in s.buckets_of(j)]
            self._rate_limit(hold, hold.key, bucket_limit(hold.key), running)
        elif hold.kind == "rate_limit":
            verdict = s.verdict_of(job)
            limit = verdict.rate_limit if verdict is not None else 0
            running = [j.id for j in s.running if _applies(s.verdict_of(j), hold.key)]
            self._rate_limit(hold, f"filter/{hold.key}", limit, running)
        elif hold.kind == "budget":
            disrupted = [[inst, why] for inst, why in s.budget_disrupted(hold.key)]
            self._add(BudgetStep(text=hold.reason, name=hold.key, disrupted=disrupted))
        else:  # slots
            n, top = len(s.running), s.max_running_jobs
            text = f"{hold.reason}: {n} of {top} running"
            self._add(SlotsStep(text=text, running=n, max_running_jobs=top))

    def _rate_limit(self, hold: Hold, bucket: str, limit: int, running: list[int]) -> None:
        text = f"{hold.reason}: {len(running)} of {limit} running"
        if running:
            text += f" (jobs {_ids(running)})"
        self._add(RateLimitStep(text=text, bucket=bucket, limit=limit, running=running))

    # -- from a lock wait -----------------------------------------------------------

    def _lock_waits(self, mine: Callable[[LockWait], bool]) -> None:
        """The first blocked lock of a waiting request (lock order), then its holder."""
        waits = self.s.lock_waits
        if waits is None:
            raise LocksNeeded
        wait = next((w for w in waits if mine(w)), None)
        if wait is None or self._full():
            return
        text = "; ".join(self._holder_text(h, wait.lock) for h in wait.held_by[:SHOWN_HOLDERS])
        if len(wait.held_by) > SHOWN_HOLDERS:
            text += f"; and {len(wait.held_by) - SHOWN_HOLDERS} more"
        step = LockStep(text=text, lock=wait.lock, mode=wait.mode, held_by=list(wait.held_by))
        self._add(step)
        self._next_holder(wait.held_by)

    def _holder_text(self, holder: LockHolder, lock: str) -> str:
        now = self.s.now
        job = self.s.job(holder.job_id) if holder.job_id is not None else None
        if job is not None:
            return f"{describe_job(job, now)} holds {lock} {holder.mode}"
        who = f"job {holder.job_id}" if holder.job_id is not None else f"client {holder.owner}"
        return f"{who} holds {lock} {holder.mode} (for {_seconds(now - holder.since)})"

    def _next_holder(self, held_by: Sequence[LockHolder]) -> None:
        """Go on with the first holder that is a live job, else the first client that
        waits itself; a holder that waits for nothing ends the chain."""
        for holder in held_by:
            job = self.s.job(holder.job_id) if holder.job_id is not None else None
            if job is not None:
                self._job(job)
                return
        waits = self.s.lock_waits or ()
        waiting = {w.owner for w in waits}
        for holder in held_by:
            if holder.job_id is None and holder.owner in waiting:
                if holder.owner in self.clients:
                    return  # met again; no job in between to name (rule 6 forbids it)
                self.clients.add(holder.owner)
                self._lock_waits(_of(holder.owner))
                return


def _applies(verdict: Verdict | None, uuid: str) -> bool:
    """Whether a running job's verdict is the RATE_LIMIT rule `uuid`."""
    return verdict is not None and verdict.action == "RATE_LIMIT" and verdict.rule_uuid == uuid


def _of(owner: str) -> Callable[[LockWait], bool]:
    """Selects the lock waits of client `owner`."""
    return lambda wait: wait.owner == owner


def _of_job(job_id: int) -> Callable[[LockWait], bool]:
    """Selects the lock waits of job `job_id`'s process."""
    return lambda wait: wait.job_id == job_id
