"""`query_queue_overview`: which jobs a queue overview (the dashboard) shows, chosen here so
that only those travel (pure: the live jobs in, the choice out).

A watcher showing the queue needs every active job, the first queued ones and the latest
finished ones, plus how many are queued and why.  Sending it every job's status to choose
from would cost O(queue) encoding and decoding per look (a quarter of a second at 10,000
queued jobs); choosing here costs a walk over the unfinished jobs' ids (which luxid keeps)
and sends O(shown).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Set

from client.api.luxi import QueueOverview
from client.vocabulary import ACTIVE_STATUSES
from luxid.jobs import Job, job_status
from luxid.jobs.model import QUEUED

ACTIVE = frozenset(ACTIVE_STATUSES)


def queue_overview(
    jobs: dict[int, Job], unfinished: Set[int], queued: int, recent: int
) -> QueueOverview:
    """The first `queued` queued jobs by id, every active one (waiting, running,
    canceling), the latest `recent` finalized ones (newest first), the number of queued
    jobs and of each pending_reason among them (null: about to start), most common first.

    `unfinished` holds at least the ids of the non-finalized live jobs (finalized ones in
    it are skipped); live jobs are in `jobs` in id order, as luxid adds them.
    """
    waiting_ids: list[int] = []
    active: list[int] = []
    reasons: Counter[str | None] = Counter()
    for job_id in unfinished:
        job = jobs.get(job_id)
        if job is None:
            continue
        status = job_status(job)
        if status == QUEUED:
            waiting_ids.append(job_id)
            reasons[job.pending_reason] += 1
        elif status in ACTIVE:
            active.append(job_id)
    latest: list[int] = []
    if recent:
        open_ids = {*waiting_ids, *active}  # every other live job is finalized
        for job_id in reversed(jobs.keys()):
            if job_id not in open_ids:
                latest.append(job_id)
                if len(latest) == recent:
                    break
    return QueueOverview(
        queued=heapq.nsmallest(queued, waiting_ids),
        queued_total=len(waiting_ids),
        active=sorted(active),
        recent=latest,
        pending_reasons=[[reason, n] for reason, n in reasons.most_common()],
    )
