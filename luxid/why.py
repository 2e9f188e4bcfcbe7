"""luxid's `why_job` (docs/contracts.md#why-a-job-waits): the shell around the pure chain
builder luxid.jobs.why.

It gathers, at one moment on the event loop, what the scheduler judges by — the live
jobs, the jobs holding a slot, the scheduler's own decision for each queued job
(`Scheduler.hold_of`), the filters' verdicts and buckets, the queue drain's rule — and asks
wconfd for its lock waits (through the stub, luxid.wconfd_link) only when the chain
reaches a job that waits for locks.
"""

from __future__ import annotations

import asyncio
import time

from client import errors
from client.api.wconfd import LockWait
from client.api.why import WhyJob
from luxid.drain_service import DrainService
from luxid.jobs.why import LocksNeeded, QueueDrainRule, Situation, why_job
from luxid.queue import Queue
from luxid.wconfd_link import WconfdLink

# How long why_job waits for wconfd's lock waits before it answers Timeout.
WCONFD_PATIENCE = 5.0


class WhyJobs:
    """Answers why_job over the queue, the drains and the link to wconfd."""

    def __init__(self, queue: Queue, drains: DrainService, link: WconfdLink) -> None:
        self.queue = queue
        self.drains = drains
        self.link = link

    async def why(self, job_id: int) -> WhyJob:
        """The chain for `job_id`; NotFound if there never was such a job."""
        answer = self._build(job_id, None)
        if answer is not None:
            return answer
        try:
            waits = await asyncio.wait_for(self.link.lock_waits(), WCONFD_PATIENCE)
        except (TimeoutError, errors.RpcError) as exc:
            why = exc.message if isinstance(exc, errors.RpcError) else "no answer"
            raise errors.Timeout(
                f"job {job_id} waits for locks, and wconfd cannot say which ({why}); "
                "try again once wconfd answers (`lw lock list` checks it)"
            ) from None
        answer = self._build(job_id, waits)
        assert answer is not None
        return answer

    def _build(self, job_id: int, waits: list[LockWait] | None) -> WhyJob | None:
        """The answer now, or None if it needs wconfd's lock waits (`waits` None)."""
        queue = self.queue
        job = queue.live.find(job_id)
        if job is None:
            raise errors.NotFound(f"no job {job_id} (see `lw job list`)")
        scheduler, filters = queue.scheduler, queue.filters
        running = scheduler.running()
        budgets = scheduler.budget_count(running)
        rule = self.drains.queue_drain_rule()
        situation = Situation(
            now=time.time(),
            job=queue.live.get,
            hold_of=lambda held: scheduler.hold_of(held, running),
            running=running,
            max_running_jobs=scheduler.max_running_jobs or 0,
            verdict_of=filters.verdict,
            buckets_of=filters.buckets,
            queue_drain=None if rule is None else QueueDrainRule(*rule),
            lock_waits=waits,
            budget_disrupted=(lambda name: ()) if budgets is None else budgets.disrupted,
        )
        try:
            return why_job(job, situation)
        except LocksNeeded:
            return None
