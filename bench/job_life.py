"""The life of a job, step by step, and the end-to-end figures it adds up to
(docs/contracts.md#performance-targets: end-to-end jobs/s and the 100-job burst's received →
started).

Job processes mark each step they reach (jobproc.timeline: forked, loop, hello, locked,
running, executed, released, finished, exit) and log the marks at DEBUG;
this script runs wconfd and luxid with their job processes at DEBUG, collects the lines
and joins them with luxid's own timestamps of each job (received, process recorded,
opcode started).  It reports:

- `idle`: one OP_TEST_DELAY(0) job at a time: the median time of each step, i.e. the
  latency a lone job pays and where it goes;
- `burst`: 100 jobs submitted at once (max_running_jobs 20), `--bursts` times:
  received → started (the opcode executing, `opexec`) and received → process recorded
  (`start_ts`), medians over the bursts of each burst's p50;
- `end_to_end`: `--jobs` jobs at once until all are final: jobs/s, and the CPU time one
  job costs in each process (the job's own, luxid, wconfd, the zygote) — on a loaded
  2-core machine the throughput is what the CPU per job allows;
- `process_floor`: what a job process costs before it does anything (one process per
  job, docs/contracts.md#jobs): a preloaded zygote (jobproc.zygote.preload) forks children that exit
  at once; the CPU of the fork (in the zygote) and of the child (its copy-on-write faults
  and its end), medians, and the jobs/s the machine's cores would allow if a job cost
  only that and the daemons' measured CPU per job (`ceiling_jobs_per_s`).

Prints one JSON object.  Run it with an older tree on PYTHONPATH to compare (the marks
are then absent, the other figures are not).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any

import psutil

# Python puts this script's directory first; it holds bench/queue.py, which would shadow
# the standard library's `queue` (used by thread pools): move the directory to the end.
sys.path.append(sys.path.pop(0))

from _util import cpu_count, daemon, set_max_running, wait_final

from client import LuxiClient
from client.vocabulary import FINALIZED_STATUSES

DELAY0 = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
STEPS = ("forked", "loop", "hello", "locked", "running", "executed", "released",
         "finished", "exit")  # fmt: skip
FINAL = FINALIZED_STATUSES
JOB_FIELDS = ["id", "received_ts", "start_ts", "opexec", "end_ts"]


class Stack:
    """wconfd and luxid on `root`, job processes logging their timelines to a file."""

    def __init__(self, run: Path, log: IO[bytes]) -> None:
        self.run = run
        self.log = log
        self.lc = LuxiClient(run / "luxid.sock", timeout=600)
        self.offset = 0  # how much of the log `timelines` has read
        procs = [
            p for p in psutil.process_iter(["cmdline"])
            if p.info["cmdline"] and str(run) in p.info["cmdline"]
        ]  # fmt: skip
        self.daemons = {
            name: next(p for p in procs if any(f"lw-{name}" in a for a in p.info["cmdline"]))
            for name in ("wconfd", "luxid")
        }

    def zygote(self) -> psutil.Process | None:
        for child in self.daemons["luxid"].children():
            if "--zygote" in child.cmdline():
                return child
        return None

    def cpu(self) -> dict[str, float]:
        """CPU seconds used so far by the daemons and the zygote."""
        procs = {**self.daemons, "zygote": self.zygote()}
        out = {}
        for name, proc in procs.items():
            if proc is not None:
                times = proc.cpu_times()
                out[name] = times.user + times.system
        return out

    def run_jobs(self, count: int) -> tuple[list[int], float]:
        """Submit `count` jobs at once and wait until all are final; (ids, seconds)."""
        start = time.perf_counter()
        answers = self.lc.submit_many_jobs(jobs=[[DELAY0] for _ in range(count)])
        ids = [job_id for _, job_id in answers]
        # Jobs start in id order and take alike: follow the last one, then any stragglers
        # (one call per job would cost luxid as much CPU as a job report).
        wait_final(self.lc, ids[-1])
        rows = self.lc.query_jobs(ids=ids, fields=["id", "status"])
        statuses = {row[1] if row[1] in FINAL else wait_final(self.lc, row[0]) for row in rows}
        elapsed = time.perf_counter() - start
        assert statuses == {"success"}, statuses
        return ids, elapsed

    def jobs(self, ids: list[int]) -> dict[int, dict[str, Any]]:
        """luxid's timestamps of the jobs (then archived, so the queue stays short)."""
        rows = self.lc.query_jobs(ids=ids, fields=JOB_FIELDS)
        self.lc.auto_archive_jobs(age=-1)
        return {row[0]: dict(zip(JOB_FIELDS, row, strict=True)) for row in rows if row}

    def timelines(self) -> dict[int, dict[str, float]]:
        """The timeline lines logged since the last call, by job id."""
        self.log.flush()
        out = {}
        with open(self.log.name, "rb") as f:
            f.seek(self.offset)
            for line in f:
                _, found, data = line.partition(b" timeline ")
                if found:
                    marks = json.loads(data)
                    out[marks.pop("job")] = marks
            self.offset = f.tell()
        return out


@contextlib.contextmanager
def stack(root: Path) -> Iterator[Stack]:
    os.environ["LW_LOG_LEVEL"] = "DEBUG"  # the job processes' level; daemons get WARNING
    with (
        open(root / "jobs.log", "wb") as log,
        daemon("wconfd", base=root, stderr=log) as (run, _),
        daemon("luxid", base=root, stderr=log),
    ):
        yield Stack(run, log)


def ms(seconds: float) -> float:
    return round(seconds * 1000, 3)


def median_ms(samples: list[float]) -> float | None:
    return ms(statistics.median(samples)) if samples else None


def breakdown(jobs: dict[int, dict[str, Any]], marks: dict[int, dict[str, float]]) -> dict:
    """Median of each step: luxid's received → the fork, then mark to mark; and the
    median minor page faults of a job process (`process_minflt`, a count: in a child of
    the zygote mostly copy-on-write copies, a large part of its CPU)."""
    steps: dict[str, list[float]] = {}
    faults: list[float] = []
    for job_id, job in jobs.items():
        m = marks.get(job_id)
        if not m:
            continue
        points = [("received", job["received_ts"])]
        points += [(step, m[step]) for step in STEPS if step in m]
        for (a, ta), (b, tb) in itertools.pairwise(points):
            steps.setdefault(f"{a}->{b}", []).append(tb - ta)
        steps.setdefault("process_cpu", []).append(m["cpu_ms"] / 1000)
        if "minflt" in m:
            faults.append(m["minflt"])
    out: dict[str, float | None] = {name: median_ms(values) for name, values in steps.items()}
    if faults:
        out["process_minflt"] = statistics.median(faults)
    return out


def idle(s: Stack, count: int) -> dict[str, Any]:
    ids = []
    for _ in range(count):
        ids += s.run_jobs(1)[0]
    jobs, marks = s.jobs(ids), s.timelines()
    started = [job["opexec"][0] - job["received_ts"] for job in jobs.values()]
    return {"received_to_started_p50_ms": median_ms(started), "steps_ms": breakdown(jobs, marks)}


def burst(s: Stack, rounds: int, size: int = 100) -> dict[str, Any]:
    started_p50, process_p50 = [], []
    for _ in range(rounds):
        ids, _ = s.run_jobs(size)
        jobs = s.jobs(ids)
        started_p50.append(
            statistics.median(j["opexec"][0] - j["received_ts"] for j in jobs.values())
        )
        process_p50.append(
            statistics.median(j["start_ts"] - j["received_ts"] for j in jobs.values())
        )
        s.timelines()
    return {
        "jobs": size,
        "received_to_started_p50_ms": median_ms(started_p50),
        "received_to_process_p50_ms": median_ms(process_p50),
        "target_p50_ms": 150,
    }


def end_to_end(s: Stack, count: int) -> dict[str, Any]:
    before = s.cpu()
    ids, elapsed = s.run_jobs(count)
    after = s.cpu()
    jobs, marks = s.jobs(ids), s.timelines()
    cpu = {name: ms((after[name] - before.get(name, 0.0)) / count) for name in after}
    job_cpu = [m["cpu_ms"] for m in marks.values()]
    if job_cpu:
        cpu["job_process"] = round(statistics.median(job_cpu), 3)
    return {
        "jobs": count,
        "jobs_per_s": round(count / elapsed, 1),
        "target_per_s": 300,
        "cpu_ms_per_job": cpu,
        "steps_ms": breakdown(jobs, marks),
    }


# Run in a fresh interpreter (the zygote's imports, not this script's): forks `n` children
# that exit at once; prints the median CPU ms of the fork (parent) and of each child.
FLOOR = """
import json, os, resource, statistics, sys, time
from jobproc.zygote import preload
preload()
def one():
    t = time.process_time()
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    fork = time.process_time() - t
    _, _, usage = os.wait4(pid, 0)
    return fork * 1000, (usage.ru_utime + usage.ru_stime) * 1000, usage.ru_minflt
runs = [one() for _ in range(int(sys.argv[1]))]
rss = int(open("/proc/self/statm").read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 2**20
print(json.dumps({"fork_ms": statistics.median(r[0] for r in runs),
                  "child_ms": statistics.median(r[1] for r in runs),
                  "child_minflt": statistics.median(r[2] for r in runs), "zygote_rss_mb": rss}))
"""


def process_floor(e2e: dict[str, Any], children: int = 200) -> dict[str, Any]:
    """The fork-and-exit cost of a job process, and the ceiling it leaves (see above)."""
    done = subprocess.run(
        [sys.executable, "-c", FLOOR, str(children)], capture_output=True, check=True, timeout=120
    )
    floor = {k: round(v, 3) for k, v in json.loads(done.stdout).items()}
    cpu = e2e["cpu_ms_per_job"]
    per_job = floor["fork_ms"] + floor["child_ms"] + cpu.get("wconfd", 0) + cpu.get("luxid", 0)
    floor["ceiling_jobs_per_s"] = round(cpu_count() * 1000 / per_job, 1)
    return floor


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=1000, help="jobs for the end-to-end run")
    parser.add_argument("--bursts", type=int, default=5, help="rounds of the 100-job burst")
    parser.add_argument("--idle", type=int, default=30, help="jobs run one at a time")
    args = parser.parse_args()
    out: dict[str, Any] = {"bench": "job_life", "cpus": cpu_count()}
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp, stack(Path(tmp)) as s:
        warm, _ = s.run_jobs(5)  # the zygote's first children
        s.jobs(warm)
        s.timelines()
        out["idle"] = idle(s, args.idle)
        set_max_running(s.run, 20)
        out["burst"] = burst(s, args.bursts)
        out["end_to_end"] = end_to_end(s, args.jobs)
    out["process_floor"] = process_floor(out["end_to_end"])
    print(json.dumps(out))


if __name__ == "__main__":
    main()
