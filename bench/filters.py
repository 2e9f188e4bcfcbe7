"""The filter figures (docs/contracts.md#performance-targets, issue 6).

- pass: one scheduling pass of luxid's queue (luxid.queue.Queue: selection with the
  filter chain and the rate limits, then applying it) over 10,000 queued jobs with 1,000
  filter rules, measured in-process on the daemon's own code with a real job store.
  `cold` is the first pass after a rule changed (chain rebuilt, the verdicts the change
  can alter judged again), `warm` a pass with the same rules (e.g. after a job ended).
  Target ≤ 100 ms.  `first_pass_ms` is the pass before them, shown and not judged: the
  one after luxid starts, when no job has a verdict or a pending reason yet, so every
  job is judged and every pending reason recorded (an event each).
- growth: the same pass over 100,000 queued jobs (docs/contracts.md#performance-targets),
  printed beside the 10,000 one of the same run.  Target ≤ 500 ms.
- unpause: through real wconfd and luxid daemons, a job held by a PAUSE rule; the time
  from calling `replace_filter` (turning the rule into CONTINUE) to luxid starting the
  job (its start_ts), and to its opcode running (opexec).  Target p50 ≤ 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import statistics
import sys
import tempfile
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any

# Python puts this script's directory first; it holds bench/queue.py, which would shadow
# the standard library's `queue` (used by thread pools): move the directory to the end.
sys.path.append(sys.path.pop(0))

from _util import cpu_count, daemon, summary

from client import LuxiClient
from client.vocabulary import FINALIZED_STATUSES
from luxid.filters import FilterRule
from luxid.jobs import new_job
from luxid.queue import Queue
from luxid.storage import SqliteJobStore

OP_IDS = ["OP_TEST_DELAY", "OP_NODE_ADD", "OP_INSTANCE_CREATE", "OP_INSTANCE_MIGRATE",
          "OP_INSTANCE_REPLACE_DISKS", "OP_NODE_EVACUATE", "OP_CLUSTER_VERIFY"]  # fmt: skip


class NeverStarts:
    """A spawner whose starts never finish: the bench measures scheduling, not processes."""

    async def prepare(self) -> None:
        """Nothing to prepare."""

    async def spawn(self, job_id: int, first: Any) -> int:
        await asyncio.Event().wait()
        raise AssertionError("unreachable")

    async def close(self) -> None:
        """Nothing to stop."""


def job_ops(rnd: random.Random) -> list[dict[str, Any]]:
    ops = []
    for _ in range(rnd.choice((1, 1, 2))):
        op_id = rnd.choice(OP_IDS)
        reason = [["lw:client:lw", f"lw {op_id.lower()} by ops", 1]]
        if rnd.random() < 0.05:
            reason.append(["lw:client:lw", f"rate-limit:{rnd.randint(1, 5)}:drain-n1", 1])
        ops.append({"OP_ID": op_id, "instance_name": f"i{rnd.randint(1, 500)}",
                    "node_name": f"n{rnd.randint(1, 50)}", "duration": 0.0, "reason": reason})  # fmt: skip
    return ops


def rules(rnd: random.Random, watermark: int, count: int = 1000) -> list[FilterRule]:
    """Mostly dormant rules of every kind, a throttle, and a soft drain of new jobs."""
    out: list[FilterRule] = []

    def add(priority: int, predicates: list[Any], action: Any) -> None:
        out.append(FilterRule(uuid=str(uuidlib.UUID(int=rnd.getrandbits(128))),
                              priority=priority, watermark=watermark,
                              predicates=predicates, action=action))  # fmt: skip

    actions = ["REJECT", "PAUSE", ["RATE_LIMIT", 3], "ACCEPT", "CONTINUE"]
    kinds = [
        lambda i: [["opcode", ["==", "OP_ID", f"OP_PLUGIN_{i}"]]],
        lambda i: [
            [
                "opcode",
                ["&", ["=", "OP_ID", "OP_INSTANCE_MIGRATE"], ["==", "instance_name", f"x{i}"]],
            ]
        ],
        lambda i: [["reason", ["==", "reason", f"maintenance ticket {i}"]]],
        lambda i: [["reason", ["=~", "reason", f"^ticket-{i}\\b"]]],
        lambda i: [["jobid", ["&", [">=", "id", 50_000 + 50 * i], ["<", "id", 50_050 + 50 * i]]]],
    ]
    for i in range(count - 10):
        add(rnd.randint(0, 99), kinds[i % len(kinds)](i), rnd.choice(actions))
    add(50, [["opcode", ["==", "OP_ID", "OP_INSTANCE_REPLACE_DISKS"]]], ["RATE_LIMIT", 10])
    for i in range(9):
        add(100 + i, [["jobid", [">", "id", "watermark"]]], "PAUSE")
    return out


async def pass_figures(state: Path, jobs: int = 10_000, rounds: int = 5) -> dict[str, Any]:
    rnd = random.Random(42)
    store = SqliteJobStore.open(state / "jobs.sqlite")
    with store.transaction() as tx:
        tx.insert(new_job(job_id, job_ops(rnd), time.time()) for job_id in range(1, jobs + 1))
    queue = Queue(store, lambda procs: NeverStarts(), 5.0)
    scheduler = queue.scheduler
    for job in queue.live.jobs.values():  # built once per job, as luxid does when it
        queue.filters.job_view(job)  # judges the submit: not part of any pass (the
    # growth figure's median of 2 rounds took half of this build as its cold pass)
    rule_set = rules(rnd, watermark=0)
    queue.filters.replace_all(rule_set)
    scheduler.max_running_jobs = 20
    scheduler.request_pass()  # as after a start: the jobs' first verdicts and pending
    scheduler.cancel()  # reasons (run here and timed, as the rounds' passes below)
    t = time.perf_counter()
    scheduler._run_pass()
    first = time.perf_counter() - t
    cold, warm, build = [], [], []
    for i in range(rounds):
        changed = list(rule_set)
        changed[i] = FilterRule(**{**_fields(changed[i]), "priority": 100 + i})
        t = time.perf_counter()
        queue.filters.replace_all(changed)
        build.append(time.perf_counter() - t)
        scheduler.max_running_jobs = 20
        for sample in (cold, warm):
            scheduler.request_pass()  # a full pass, as a rule change asks for one ...
            scheduler.cancel()  # ... run here and timed instead of from the loop
            t = time.perf_counter()
            scheduler._run_pass()
            sample.append(time.perf_counter() - t)
    reasons: dict[str, int] = {}
    for job in queue.live.jobs.values():
        key = (job.pending_reason or "starting").split(" ")[0]
        reasons[key] = reasons.get(key, 0) + 1
    await queue.close(5.0)
    return {
        "queued_jobs": jobs,
        "filters": len(rule_set),
        "chain_build_ms": round(statistics.median(build) * 1000, 1),
        "first_pass_ms": round(first * 1000, 1),
        "cold_pass_ms": round(statistics.median(cold) * 1000, 1),
        "warm_pass_ms": round(statistics.median(warm) * 1000, 1),
        "pending_reasons": reasons,
        "target_ms": 100,
    }


def _fields(rule: FilterRule) -> dict[str, Any]:
    return {f: getattr(rule, f) for f in rule.__struct_fields__}


def unpause_latency(samples: int = 30) -> dict[str, Any]:
    delay = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
    with daemon("wconfd") as (run, _), daemon("luxid", base=run.parent):
        lc = LuxiClient(run / "luxid.sock")
        lc.wait_for_job_change(job_id=lc.submit_job(ops=[delay]), fields=["status"],
                               prev_values=["x"], prev_log_serial=None, timeout=10)  # fmt: skip
        started, running = [], []
        for _ in range(samples):
            uuid = lc.replace_filter(uuid=None, priority=0, predicates=[],
                                     action="PAUSE", reason=[])  # fmt: skip
            job_id = lc.submit_job(ops=[delay])
            t = time.time()
            lc.replace_filter(uuid=uuid, priority=0, predicates=[], action="CONTINUE",
                              reason=[])  # fmt: skip
            prev = None
            while prev is None or prev[0] not in FINALIZED_STATUSES:
                prev = lc.wait_for_job_change(
                    job_id=job_id, fields=["status"], prev_values=prev,
                    prev_log_serial=10**9, timeout=10,
                ).values  # fmt: skip
            (row,) = lc.query_jobs(ids=[job_id], fields=["start_ts", "opexec"])
            started.append(row[0] - t)
            running.append(row[1][0] - t)
            lc.delete_filter(uuid=uuid)
    return {
        "to_start": summary(started),
        "to_running": summary(running),
        "target_p50_ms": 100,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--growth-jobs", type=int, default=100_000,
                        help="queued jobs of the growth pass (0: skip it)")  # fmt: skip
    parser.add_argument("--only", choices=["pass", "growth", "unpause"], action="append",
                        help="measure only these figures (repeatable; default: all)")  # fmt: skip
    args = parser.parse_args()
    parts = set(args.only or ["pass", "growth", "unpause"])
    if not args.growth_jobs:
        parts.discard("growth")
    out: dict[str, Any] = {"bench": "filters", "cpus": cpu_count()}
    if "pass" in parts:
        with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
            out["pass"] = asyncio.run(pass_figures(Path(tmp)))
    if "growth" in parts:
        with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
            grown = asyncio.run(pass_figures(Path(tmp), jobs=args.growth_jobs, rounds=2))
        out["growth"] = {**grown, "target_ms": 500}
    if "unpause" in parts:
        out["unpause"] = unpause_latency()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
