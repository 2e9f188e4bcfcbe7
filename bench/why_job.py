"""The why_job figure (docs/contracts.md#why-a-job-waits): how long luxid takes to say why a
job waits, with 1,000 queued jobs and 500 locks held, through real wconfd and luxid daemons
and the sync stub.

Setup: a wconfd client (the bench) holds 500 node locks exclusively; max_running_jobs is
20 and 20 jobs each wait for one of those locks (a lock chain: why_job asks wconfd for its
lock waits); 1,000 more jobs are queued behind the full slots.  Measured, one call at a
time: `waiting` — why_job of a job that waits for a lock (chain: its lock, held by the
bench client; one lock_waits call to wconfd inside), `queued` — why_job of a queued job
(chain: the slots; luxid alone).  Target: p50 ≤ 2 ms for both.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

# Python puts this script's directory first; it holds bench/queue.py, which would shadow
# the standard library's `queue` (used by thread pools): move the directory to the end.
sys.path.append(sys.path.pop(0))

from _util import cpu_count, daemon, set_max_running, summary

from client import LuxiClient, WConfdClient

LOCKS = 500
RUNNING = 20
QUEUED = 1000
SAMPLES = 500
TARGET_P50_MS = 2.0


def delay_on(node: str) -> list[dict[str, object]]:
    return [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_nodes": [node]}]


def until(check: Callable[[], object], timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {check}")
        time.sleep(0.05)


def timed(lc: LuxiClient, job_id: int, kind: str) -> dict[str, float]:
    """why_job of `job_id` SAMPLES times; checks its first Step is of `kind`."""
    answer = lc.why_job(job_id=job_id)
    assert answer.chain and type(answer.chain[0]).__name__.lower().startswith(kind), answer
    samples = []
    for _ in range(SAMPLES):
        t = time.perf_counter()
        lc.why_job(job_id=job_id)
        samples.append(time.perf_counter() - t)
    return summary(samples)


def measure() -> dict[str, Any]:
    with daemon("wconfd") as (run, _), daemon("luxid", base=run.parent):
        set_max_running(run, RUNNING)
        wc = WConfdClient(run / "wconfd.sock", name="bench-holder")
        lc = LuxiClient(run / "luxid.sock", timeout=60)
        try:
            nodes = [f"n{i:03d}" for i in range(LOCKS)]
            assert wc.try_update_locks([[f"node/{n}", "exclusive"] for n in nodes]) == []
            until(lambda: lc.query_queue_info().max_running_jobs == RUNNING)
            waiting = [
                outcome[1]
                for outcome in lc.submit_many_jobs(jobs=[delay_on(n) for n in nodes[:RUNNING]])
            ]
            until(lambda: len(wc.lock_waits()) == RUNNING)
            queued = [
                outcome[1] for outcome in lc.submit_many_jobs(jobs=[delay_on(nodes[-1])] * QUEUED)
            ]
            info = lc.query_queue_info()
            figures = {
                "waiting": timed(lc, int(waiting[0]), "lock"),
                "queued": timed(lc, int(queued[-1]), "slots"),
            }
            return {
                "locks_held": len(wc.list_locks()),
                "lock_waits": len(wc.lock_waits()),
                "queued_jobs": info.counts.get("queued", 0),
                "waiting_jobs": info.counts.get("waiting", 0),
                **figures,
            }
        finally:  # no job process outlives the bench: cancel the queued, kill the others
            rows = lc.query_jobs(ids=None, fields=["id", "status"])
            for job_id, status in sorted(rows, key=lambda row: row[1] != "queued"):
                if status not in ("success", "error", "canceled"):
                    lc.cancel_job(job_id=job_id, kill=True)
            wc.free_locks()
            wc.close()
            lc.close()


def main() -> None:
    figures = measure()
    worst = max(figures["waiting"]["p50_ms"], figures["queued"]["p50_ms"])
    print(
        json.dumps(
            {
                "bench": "why_job",
                "cpus": cpu_count(),
                **figures,
                "p50_ms": worst,
                "target_p50_ms": TARGET_P50_MS,
            }
        )
    )


if __name__ == "__main__":
    main()
