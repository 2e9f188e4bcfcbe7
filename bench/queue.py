"""The job queue's figures (docs/contracts.md#performance-targets): submit rate, submit→running
latency, end-to-end jobs/s (zygote and plain exec) and luxid's RSS with 100,000 archived jobs.

- submit rate: one sequential sync client (every call waits for its own durable commit,
  so it is bounded by the disk's fsync time, measured here too) — its first 500 submits
  to a fresh luxid apart, then over `seconds` — and one asyncio client keeping 64 calls
  in flight (luxid commits concurrent submits together).  A PAUSE rule
  keeps the jobs queued so only the submit path is measured.
- latency: OP_TEST_DELAY(0) on an idle queue, from the client's submit call to the opcode
  running (luxid's opexec timestamp), sequentially.
- end-to-end: N OP_TEST_DELAY(0) jobs submitted at once, max_running_jobs 20, until all
  are finalized; job processes forked by the zygote, then started by plain exec.
- RSS: 100,000 jobs submitted (a REJECT rule finalizes them at once) and archived, then
  luxid's resident memory, and again after a restart.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

# Python puts this script's directory first; it holds bench/queue.py, which would shadow
# the standard library's `queue` (used by thread pools): move the directory to the end.
sys.path.append(sys.path.pop(0))

from _luxid import DELAY0, PAUSE_ALL, REJECT_ALL, fsync_ms, pipelined_submit_rate, stack
from _util import cpu_count, set_max_running, summary, wait_final

from client import LuxiClient


def sequential_rate(lc: LuxiClient, *, seconds: float = 0.0, count: int = 0) -> float:
    """Submits/s of one sync client, for `seconds` or for `count` submits."""
    done, start = 0, time.perf_counter()
    while done < count or time.perf_counter() - start < seconds:
        lc.submit_job(ops=[DELAY0])
        done += 1
    return done / (time.perf_counter() - start)


def submit_rates(run: Path, seconds: float = 3.0) -> dict[str, Any]:
    lc = LuxiClient(run / "luxid.sock")
    uuid = lc.replace_filter(uuid=None, **PAUSE_ALL)
    # A fresh luxid's WAL grows for its first ~1,000 pages (~250 submits), each commit
    # then paying for the file's new size too (fsync_commit_fresh_ms); after its first
    # checkpoint it is written over, as in a luxid that has been running: shown apart.
    fresh = sequential_rate(lc, count=500)
    sequential = sequential_rate(lc, seconds=seconds)

    rate = pipelined_submit_rate(run / "luxid.sock", seconds)
    lc.replace_filter(uuid=uuid, **REJECT_ALL)  # cancels the queued jobs in one pass
    wait_final(lc, max(row[0] for row in lc.query_jobs(ids=None, fields=["id"])))
    lc.delete_filter(uuid=uuid)
    lc.auto_archive_jobs(age=-1)
    return {
        "sequential_per_s": round(sequential),
        "sequential_first_500_per_s": round(fresh),
        "pipelined_64_per_s": round(rate),
    }


def latency(run: Path, samples: int = 40) -> dict[str, Any]:
    lc = LuxiClient(run / "luxid.sock")
    lat = []
    for _ in range(samples + 3):
        t = time.time()
        job_id = lc.submit_job(ops=[DELAY0])
        wait_final(lc, job_id)
        (row,) = lc.query_jobs(ids=[job_id], fields=["opexec"])
        lat.append(row[0][0] - t)
        time.sleep(0.02)
    return summary(lat[3:])  # the first ones warm the zygote's children up


def end_to_end(run: Path, jobs: int) -> float:
    lc = LuxiClient(run / "luxid.sock", timeout=600)
    t = time.perf_counter()
    ids = [job_id for _, job_id in lc.submit_many_jobs(jobs=[[DELAY0] for _ in range(jobs)])]
    statuses = {wait_final(lc, job_id) for job_id in ids}
    elapsed = time.perf_counter() - t
    assert statuses == {"success"}, statuses
    lc.auto_archive_jobs(age=-1)
    return round(jobs / elapsed, 1)


def rss_archived(root: Path, jobs: int) -> dict[str, Any]:
    with stack(root) as (run, pid):
        lc = LuxiClient(run / "luxid.sock", timeout=600)
        lc.replace_filter(uuid=None, **REJECT_ALL)
        batch = 1000
        for start in range(0, jobs, batch):
            lc.submit_many_jobs(jobs=[[DELAY0] for _ in range(min(batch, jobs - start))])
            if (start // batch) % 10 == 9:
                lc.auto_archive_jobs(age=-1)
        lc.auto_archive_jobs(age=-1)
        info = lc.query_queue_info()
        assert sum(info.counts.values()) == 0, info
        rss = psutil.Process(pid).memory_info().rss
        fds = psutil.Process(pid).num_fds()
    with stack(root) as (run, pid):
        LuxiClient(run / "luxid.sock").query_queue_info()
        rss_restart = psutil.Process(pid).memory_info().rss
    return {
        "archived_jobs": jobs,
        "rss_mb": round(rss / 2**20, 1),
        "rss_after_restart_mb": round(rss_restart / 2**20, 1),
        "open_fds": fds,
        "target_mb": 200,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000, help="jobs for the end-to-end figure")
    parser.add_argument("--exec-jobs", type=int, default=200, help="same, plain exec")
    parser.add_argument("--archived", type=int, default=100_000, help="jobs for the RSS figure")
    args = parser.parse_args()
    out: dict[str, Any] = {"bench": "queue", "cpus": cpu_count()}
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
        root = Path(tmp) / "a"
        root.mkdir()
        out.update(fsync_ms(Path(tmp)))
        with stack(root) as (run, _):
            out["submit"] = {**submit_rates(run), "target_per_s": 2000}
            out["submit_to_running"] = {**latency(run), "target_p50_ms": 10}
            set_max_running(run, 20)
            out["end_to_end_zygote_per_s"] = end_to_end(run, args.jobs)
        with stack(root, "--job-spawn", "exec") as (run, _):
            out["end_to_end_exec_per_s"] = end_to_end(run, args.exec_jobs)
        out["end_to_end_target_per_s"] = 300
        rss_root = Path(tmp) / "rss"
        rss_root.mkdir()
        out["rss"] = rss_archived(rss_root, args.archived)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
