"""100 jobs submitted at once (docs/contracts.md#performance-targets): received →
started p50 ≤ 150 ms, and the rate until all are final.

`submit_many_jobs` of N OP_TEST_DELAY(0) jobs with max_running_jobs 20 (zygote spawn).
Per job: `received_ts` → `start_ts` (luxid gave it a process: "started"), and → `opexec`
(its opcode runs).  Medians over `--runs` bursts on one warm stack.
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

sys.path.append(sys.path.pop(0))  # bench/queue.py must not shadow the stdlib's queue

from _luxid import DELAY0, stack
from _util import cpu_count, set_max_running, wait_final

from client import LuxiClient


def burst(run: Path, jobs: int) -> dict[str, float]:
    """One burst: submit, follow every job to its end; its figures in ms and jobs/s."""
    with LuxiClient(run / "luxid.sock", timeout=600) as lc:
        t = time.perf_counter()
        answers = lc.submit_many_jobs(jobs=[[DELAY0] for _ in range(jobs)])
        ids = [job_id for ok, job_id in answers if ok]
        statuses = {wait_final(lc, job_id) for job_id in ids}
        elapsed = time.perf_counter() - t
        assert statuses == {"success"}, statuses
        rows = lc.query_jobs(ids=ids, fields=["received_ts", "start_ts", "opexec"])
        lc.auto_archive_jobs(age=-1)
    started = sorted((start - received) * 1000 for received, start, _ in rows)
    running = sorted((opexec[0] - received) * 1000 for received, _, opexec in rows)
    return {
        "received_to_started_p50_ms": statistics.median(started),
        "received_to_started_max_ms": started[-1],
        "received_to_opexec_p50_ms": statistics.median(running),
        "until_all_final_per_s": jobs / elapsed,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    out: dict[str, Any] = {"bench": "burst", "cpus": cpu_count(), "jobs": args.jobs}
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
        root = Path(tmp) / "a"
        root.mkdir()
        with stack(root) as (run, _):
            set_max_running(run, 20)
            burst(run, 20)  # warm the zygote and the page cache up
            runs = [burst(run, args.jobs) for _ in range(args.runs)]
    for key in runs[0]:
        out[key] = round(statistics.median(r[key] for r in runs), 1)
    out["target_received_to_started_p50_ms"] = 150
    out["target_per_s"] = 300
    print(json.dumps(out))


if __name__ == "__main__":
    main()
