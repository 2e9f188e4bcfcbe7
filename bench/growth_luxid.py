"""luxid's cost as the work grows (docs/contracts.md#performance-targets, the growth rows):
each figure with 1,000,000 jobs beside the same figure with the first 10,000, in one run.

The state is built through luxid's own methods, on one wconfd + luxid:

1. A PAUSE rule holds new jobs queued.  Jobs 1-10,000 are submitted by one client: the
   first `--sync` by a sync stub one call at a time, the rest by the asyncio stub with 64
   calls in flight (`submit_first`).  At these 10,000 queued jobs: `query_jobs` of one job
   by id, luxid's RSS, and luxid killed (SIGKILL) and started again until its first
   answered call (`query_queue_info`, which checks that every job came back).
2. The rule turns into REJECT (the queued jobs are canceled in one pass) and
   `auto_archive_jobs` archives them; `query_jobs` of an archived job at 10,000.
3. Jobs up to 990,000 are submitted with `submit_many_jobs` (batches of 1,000, two
   calls in flight; REJECT finalizes each job as it is stored) and archived with
   `auto_archive_jobs` every 10,000 (`build_per_s`: the rate of each 100,000; no bulk
   loader: the socket takes ~8,000 jobs/s here, so this is about two minutes).
4. The rule turns back into PAUSE; jobs 990,001-1,000,000 are submitted as in 1
   (`submit_last`): the rates and their ratio to 1's, same run (target ≥ 0.9).
5. At 1,000,000 jobs (990,000 archived, 10,000 queued): `query_jobs` of one job by id
   (archived ones and queued ones apart: p50 target ≤ 2 ms), luxid's RSS, and the kill -9
   → first answered call (target ≤ 3 s, RSS after it ≤ 300 MB).

`restart` times from the SIGKILL to the first answer (process start and imports
included: what an operator waits for when systemd restarts luxid), with `start_to_answer_s`
from the new process's start.  It assumes the modules' bytecode is compiled, as an
installed package has it: a source tree never compiled and run with PYTHONDONTWRITEBYTECODE
set compiles every module at each start, which here cost about as much as the load.

The drain row: bench/drain.py's drain (its `populate` and `drain_node`), 10,000 instances
with max_parallel 100 beside 1,000 instances with the same max_parallel, each on a fresh
stack (`--drain-instances 0` skips it).  The scheduling pass over 100,000 queued jobs is
bench/filters.py's growth figure (not repeated here).

`--jobs`/`--queued` scale the run down (tests run it with a few thousand).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

sys.path.append(sys.path.pop(0))  # bench/queue.py must not shadow the stdlib's queue

from _luxid import DELAY0, PAUSE_ALL, REJECT_ALL, luxid_pid, pipelined_submit_rate, stack
from _util import cpu_count, daemon, summary, wait_final
from drain import drain_node, populate

from client import AsyncLuxiClient, LuxiClient

ARCHIVE_EVERY = 10_000
QUERY_FIELDS = ["id", "status", "priority", "received_ts", "summary"]


class Luxid:
    """The one luxid of the run, beside a running wconfd: started, killed, started again."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.run = root / "run"
        self._stack = contextlib.ExitStack()
        self.pid = 0

    def start(self) -> None:
        self._stack.enter_context(daemon("luxid", base=self.root))
        self.pid = luxid_pid(self.run)

    def client(self) -> LuxiClient:
        return LuxiClient(self.run / "luxid.sock", timeout=600)

    def rss_mb(self) -> float:
        return round(psutil.Process(self.pid).memory_info().rss / 2**20, 1)

    def kill9_restart(self, expect_jobs: int) -> dict[str, Any]:
        """SIGKILL luxid, start it again, time its first answered call."""
        t = time.perf_counter()
        os.kill(self.pid, signal.SIGKILL)
        self._stack.close()  # reaps the killed process
        self._stack = contextlib.ExitStack()
        started = time.perf_counter()
        self._stack.enter_context(daemon("luxid", base=self.root))
        with self.client() as lc:
            info = lc.query_queue_info()
        answered = time.perf_counter()
        self.pid = luxid_pid(self.run)
        assert sum(info.counts.values()) == expect_jobs, info
        return {
            "kill_to_answer_s": round(answered - t, 3),
            "start_to_answer_s": round(answered - started, 3),
            "rss_after_mb": self.rss_mb(),
        }

    def stop(self) -> None:
        self._stack.close()


def submit_rates(luxid: Luxid, jobs: int, sync: int) -> dict[str, Any]:
    """`jobs` submits by one client: `sync` one at a time, then the rest 64 in flight."""
    with luxid.client() as lc:
        t = time.perf_counter()
        for _ in range(sync):
            lc.submit_job(ops=[DELAY0])
        sync_rate = sync / (time.perf_counter() - t)
    piped = pipelined_submit_rate(luxid.run / "luxid.sock", count=jobs - sync)
    return {"sync_per_s": round(sync_rate), "pipelined_64_per_s": round(piped)}


def query_one(lc: LuxiClient, ids: list[int], samples: int) -> dict[str, float]:
    """query_jobs of one job by id, ids drawn from `ids`: latency."""
    rnd = random.Random(7)
    lat = []
    for _ in range(samples):
        job_id = rnd.choice(ids)
        t = time.perf_counter()
        (row,) = lc.query_jobs(ids=[job_id], fields=QUERY_FIELDS)
        lat.append(time.perf_counter() - t)
        assert row is not None and row[0] == job_id
    return summary(lat)


def finalize_and_archive(lc: LuxiClient, rule: str) -> None:
    """Turn the PAUSE rule into REJECT (its queued jobs are canceled), archive them all."""
    lc.replace_filter(uuid=rule, **REJECT_ALL)
    wait_final(lc, max(row[0] for row in lc.query_jobs(ids=None, fields=["id"])))
    archived, left = lc.auto_archive_jobs(age=-1, timeout=None)
    assert left == 0, (archived, left)


def build(sock: Path, upto: int, first: int, chunk: int) -> list[int]:
    """submit_many_jobs (REJECT set) until job `upto`, archiving every 10,000 (as an
    operator's auto-archiving would: luxid never holds more finalized jobs than that):
    the jobs/s of each `chunk`, archiving included."""

    async def go() -> list[int]:
        client = AsyncLuxiClient(sock, timeout=600)
        rates, next_id = [], first
        t = time.perf_counter()
        while next_id <= upto:
            end = min(upto, next_id + ARCHIVE_EVERY - 1)
            batches = [min(1000, end + 1 - s) for s in range(next_id, end + 1, 1000)]
            for pair in range(0, len(batches), 2):
                await asyncio.gather(*(
                    client.submit_many_jobs(jobs=[[DELAY0]] * n) for n in batches[pair:pair + 2]
                ))  # fmt: skip
            _, left = await client.auto_archive_jobs(age=-1, timeout=None)
            assert left == 0
            if (end + 1 - first) % chunk == 0 or end == upto:
                done = (end - first) % chunk + 1
                rates.append(round(done / (time.perf_counter() - t)))
                t = time.perf_counter()
            next_id = end + 1
        await client.close()
        return rates

    return asyncio.run(go())


def jobs_growth(root: Path, total: int, queued: int, sync: int, samples: int) -> dict[str, Any]:
    """Steps 1-5 of the module docstring: the figures at `queued` jobs and at `total`."""
    out: dict[str, Any] = {"jobs": total, "queued": queued}
    with daemon("wconfd", base=root):
        luxid = Luxid(root)
        luxid.start()
        try:
            with luxid.client() as lc:
                rule = lc.replace_filter(uuid=None, **PAUSE_ALL)
            out["submit_first"] = submit_rates(luxid, queued, sync)
            small: dict[str, Any] = {"jobs": queued}
            with luxid.client() as lc:
                small["query_queued"] = query_one(lc, list(range(1, queued + 1)), samples)
            small["rss_mb"] = luxid.rss_mb()
            small["restart"] = luxid.kill9_restart(queued)
            with luxid.client() as lc:
                finalize_and_archive(lc, rule)
                small["query_archived"] = query_one(lc, list(range(1, queued + 1)), samples)
            out["small"] = small

            t = time.perf_counter()
            out["build_per_s"] = build(
                luxid.run / "luxid.sock", total - queued, queued + 1, chunk=100_000
            )
            out["build_s"] = round(time.perf_counter() - t, 1)

            with luxid.client() as lc:
                lc.replace_filter(uuid=rule, **PAUSE_ALL)
            out["submit_last"] = submit_rates(luxid, queued, sync)
            first, last = out["submit_first"], out["submit_last"]
            out["submit_ratio"] = {
                k: round(last[k] / first[k], 3) for k in ("sync_per_s", "pipelined_64_per_s")
            }
            big: dict[str, Any] = {"jobs": total}
            with luxid.client() as lc:
                big["query_archived"] = query_one(lc, list(range(1, total - queued + 1)), samples)
                big["query_queued"] = query_one(
                    lc, list(range(total - queued + 1, total + 1)), samples
                )
            big["rss_mb"] = luxid.rss_mb()
            big["restart"] = luxid.kill9_restart(queued)
            out["big"] = big
        finally:
            luxid.stop()
    out["targets"] = {"kill_to_answer_s": 3.0, "rss_mb": 300, "submit_ratio": 0.9,
                      "query_p50_ms": 2.0}  # fmt: skip
    return out


@contextlib.contextmanager
def _fresh_stack() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp, stack(Path(tmp)) as (run, _):
        yield run


def drain_growth(instances: int, small: int, max_parallel: int) -> dict[str, Any]:
    """bench/drain.py's drain at `instances` and at `small`, same max_parallel."""
    out: dict[str, Any] = {"max_parallel": max_parallel}
    for key, n in (("small", small), ("big", instances)):
        with _fresh_stack() as run:
            t = time.perf_counter()
            src = populate(run, n, targets=n // 100 + 1)
            built = time.perf_counter() - t
            elapsed, overlap, record = drain_node(run, src, n, max_parallel)
        out[key] = {
            "instances": n,
            "populate_s": round(built, 1),
            "complete_s": round(elapsed, 2),
            "moves_per_s": round(n / elapsed, 1),
            "max_concurrent_moves": overlap,
            "record_writes": record["serial_no"],
        }
    out["time_ratio"] = round(out["big"]["complete_s"] / out["small"]["complete_s"], 2)
    out["target_complete_s"] = 150.0
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1_000_000, help="jobs in all (0: skip)")
    parser.add_argument("--queued", type=int, default=10_000, help="jobs queued at the end")
    parser.add_argument("--sync", type=int, default=2000, help="submits by the sync stub")
    parser.add_argument("--samples", type=int, default=2000, help="query_jobs calls")
    parser.add_argument("--drain-instances", type=int, default=10_000)
    parser.add_argument("--drain-small", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=100)
    args = parser.parse_args()
    out: dict[str, Any] = {"bench": "growth_luxid", "cpus": cpu_count(),
                           "load_before": os.getloadavg()[0]}  # fmt: skip
    if args.jobs:
        with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
            out["jobs"] = jobs_growth(Path(tmp), args.jobs, args.queued, args.sync, args.samples)
    if args.drain_instances:
        out["drain"] = drain_growth(args.drain_instances, args.drain_small, args.max_parallel)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
