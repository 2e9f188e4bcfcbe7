"""The disruption budgets' figure (docs/contracts.md#performance-targets, issue 27).

- pass: one full scheduling pass of luxid's queue (luxid.queue.Queue, in-process on the
  daemon's own code with a real job store) over 10,000 queued jobs, each a migration of
  one of 10,000 instances, under 100 budgets of 100 members each (max_disrupted 2), with
  20 slots; `cold` is the first pass after one budget changed (the book rebuilt), `warm`
  the next.  The same pass without budgets is measured in the same run, for the ratio.
  Target ≤ 100 ms.
"""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# Python puts this script's directory first; it holds bench/queue.py, which would shadow
# the standard library's `queue` (used by thread pools): move the directory to the end.
sys.path.append(sys.path.pop(0))

from _util import cpu_count
from filters import NeverStarts

from client.budgets import BudgetRecord
from luxid.budgets import InstanceFacts, build_book
from luxid.jobs import new_job
from luxid.queue import Queue
from luxid.storage import SqliteJobStore

INSTANCES, BUDGETS, JOBS = 10_000, 100, 10_000


def timed_pass(queue: Queue) -> float:
    """One full pass, run here and timed instead of from the event loop."""
    scheduler = queue.scheduler
    scheduler.request_pass()
    scheduler.cancel()
    t = time.perf_counter()
    scheduler._run_pass()
    return time.perf_counter() - t


async def pass_figures(state: Path, rounds: int = 5) -> dict[str, Any]:
    rnd = random.Random(27)
    store = SqliteJobStore.open(state / "jobs.sqlite")
    ops = [
        [{"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": f"i{rnd.randrange(INSTANCES)}"}]
        for _ in range(JOBS)
    ]
    with store.transaction() as tx:
        tx.insert(new_job(job_id, ops[job_id - 1], time.time()) for job_id in range(1, JOBS + 1))
    queue = Queue(store, lambda procs: NeverStarts(), 5.0)
    scheduler = queue.scheduler
    scheduler.max_running_jobs = 20
    facts = [InstanceFacts(f"i{n}", (f"g{n % BUDGETS}",), rnd.random() > 0.01)
             for n in range(INSTANCES)]  # fmt: skip
    records = [BudgetRecord(name=f"b{k}", tags=(f"g{k}",), max_disrupted=2) for k in range(BUDGETS)]
    cold, warm, build = [], [], []
    timed_pass(queue)  # the first pass gives every job its pending_reason
    plain = [timed_pass(queue) for _ in range(rounds)]
    scheduler.budgets = build_book(records, facts)
    timed_pass(queue)  # the budgets' reasons replace the slots' for the jobs they hold
    for i in range(rounds):
        t = time.perf_counter()
        changed = [*records[:i], BudgetRecord(name=f"b{i}", tags=(f"g{i}",), max_disrupted=3)]
        scheduler.budgets = build_book(changed + records[i + 1 :], facts)
        build.append(time.perf_counter() - t)
        cold.append(timed_pass(queue))
        warm.append(timed_pass(queue))
    reasons: dict[str, int] = {}
    for job in queue.live.jobs.values():
        key = (job.pending_reason or "starting").split(" ")[0]
        reasons[key] = reasons.get(key, 0) + 1
    await queue.close(5.0)
    ms = lambda xs: round(statistics.median(xs) * 1000, 1)  # noqa: E731
    return {
        "queued_jobs": JOBS,
        "instances": INSTANCES,
        "budgets": BUDGETS,
        "book_build_ms": ms(build),
        "cold_pass_ms": ms(cold),
        "warm_pass_ms": ms(warm),
        "no_budgets_pass_ms": ms(plain),
        "pending_reasons": reasons,
        "target_ms": 100,
    }


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
        figures = asyncio.run(pass_figures(Path(tmp)))
    print(json.dumps({"bench": "budgets", "cpus": cpu_count(), "pass": figures}))


if __name__ == "__main__":
    main()
