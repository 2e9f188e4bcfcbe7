"""cancel_job of queued jobs, one client (≥ 2,000/s, docs/contracts.md#performance-targets).

A PAUSE rule keeps N jobs queued; one sync client then cancels them one by one, each call
waiting for its own durable status change.  Printed with the same run's fsync cost of one
small WAL commit (the floor of a durable change on this disk) and luxid's CPU time per
cancel.  Each figure is the median of `--runs` runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

sys.path.append(sys.path.pop(0))  # bench/queue.py must not shadow the stdlib's queue

from _luxid import DELAY0, PAUSE_ALL, fsync_ms, stack
from _util import cpu_count

from client import LuxiClient


def cancel_run(run: Path, pid: int, jobs: int) -> dict[str, float]:
    """Queue `jobs` paused jobs, cancel them all from one client; rate and luxid CPU."""
    with LuxiClient(run / "luxid.sock", timeout=120) as lc:
        uuid = lc.replace_filter(uuid=None, **PAUSE_ALL)
        ids: list[int] = []
        for start in range(0, jobs, 1000):
            batch = [[DELAY0] for _ in range(min(1000, jobs - start))]
            ids += [job_id for _, job_id in lc.submit_many_jobs(jobs=batch)]
        proc = psutil.Process(pid)
        cpu0 = sum(proc.cpu_times()[:2])
        t = time.perf_counter()
        for job_id in ids:
            ok, _ = lc.cancel_job(job_id=job_id, kill=False)
            assert ok
        elapsed = time.perf_counter() - t
        cpu = sum(proc.cpu_times()[:2]) - cpu0
        assert {row[0] for row in lc.query_jobs(ids=ids, fields=["status"])} == {"canceled"}
        lc.delete_filter(uuid=uuid)
        lc.auto_archive_jobs(age=-1)
    return {"per_s": jobs / elapsed, "luxid_cpu_us_per_cancel": cpu / jobs * 1e6}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=3000, help="queued jobs canceled per run")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    out: dict[str, Any] = {"bench": "cancel", "cpus": cpu_count(), "jobs": args.jobs}
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
        root = Path(tmp) / "a"
        root.mkdir()
        out.update(fsync_ms(Path(tmp)))
        with stack(root) as (run, pid):
            runs = [cancel_run(run, pid, args.jobs) for _ in range(args.runs)]
    out["cancel_per_s"] = round(statistics.median(r["per_s"] for r in runs))
    out["luxid_cpu_us_per_cancel"] = round(
        statistics.median(r["luxid_cpu_us_per_cancel"] for r in runs)
    )
    out["target_per_s"] = 2000
    print(json.dumps(out))


if __name__ == "__main__":
    main()
