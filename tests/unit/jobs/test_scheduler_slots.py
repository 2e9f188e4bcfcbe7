"""query_queue_info's `running` (Scheduler.slots_taken) judges slots as a scheduling pass
does: a finalized job's slot is free even before the queue lets go of it.  A job's last
report is in memory while it is made durable, and a query in that moment once answered
`running: 1` beside `counts.running: 0` (CI, test_query_queue_info)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, cast

from luxid.active_filters import ActiveFilters
from luxid.jobs import fail_job, new_job, start_job
from luxid.live_jobs import LiveJobs
from luxid.scheduler import Scheduler

OPS = [{"OP_ID": "OP_TEST_DELAY", "duration": 30}]


def nothing(*_: Any) -> None:
    return None


def test_a_finalized_jobs_slot_is_not_counted_before_the_queue_releases_it() -> None:
    running = start_job(new_job(1, OPS, 1000.0), 1001.0, 4242, 999.0)
    other = start_job(new_job(2, OPS, 1000.0), 1001.0, 4243, 999.0)
    live = SimpleNamespace(jobs={1: running, 2: other})
    scheduler = Scheduler(
        cast(LiveJobs, live), cast(ActiveFilters, None), nothing, nothing, nothing
    )
    scheduler.take_slot(1)
    scheduler.take_slot(2)
    assert scheduler.slots_taken == 2
    live.jobs[1] = fail_job(running, 1002.0, "its process died")  # in memory, slot not yet let go
    assert scheduler.slots_taken == 1
    assert [job.id for job in scheduler.running()] == [2]  # what a pass counts
