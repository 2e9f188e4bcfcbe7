"""Drains (docs/contracts.md#node-drain, issue 13): a node of 1,000 instances emptied with
max_parallel 20.

- `complete_s`: from `drain_node` to the drain reported complete (every move finished),
  migrations of 0 s (target ≤ 15 s); `moves_per_s` follows from it.
- `max_concurrent_moves`: the most migration jobs running at one time, from the jobs'
  start and end timestamps (must not exceed max_parallel).
- `record_bytes`, `record_writes`: the drain record's final size (JSON) and how many
  times luxid wrote it to wconfd during the drain.
- `budget`: the same drain on a fresh cluster whose 1,000 instances are all in one
  disruption budget of 20 (docs/contracts.md#disruption-budgets), with max_parallel 50 so
  that the budget paces it: `complete_s` (target ≤ 15 s), `most_disrupted` (the most of
  its members disrupted at once by a started migration, from the jobs' timestamps: never
  > 20), and `ratio_to_unbudgeted` (its time over the drain above, in the same run).
- `deadline_delay_ms`: how late a deadline fires — the "deadline passed" event's time
  minus the stored deadline — for `--deadlines` queue drains and one node drain whose
  move waits for a lock (target ≤ 100 ms).

The instances are written to wconfd directly (under the admin locks), then luxid drains
the node through real job processes.  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.append(sys.path.pop(0))  # bench/queue.py must not shadow the stdlib's queue

from _luxid import stack
from _util import cpu_count

from client import LuxiClient, WConfdClient
from client.api.luxi import DrainStatus

ADMIN_LOCKS = [["instance/[lockset]", "exclusive"], ["node/[lockset]", "exclusive"]]


def populate(
    run: Path, instances: int, targets: int, source: int = 0, tags: tuple[str, ...] = ()
) -> str:
    """A source node with `instances` running instances of 32 MiB and 1 CPU (tagged
    `tags`), and `targets` empty nodes (each takes 128 such instances: 32 CPUs x the vcpu
    ratio 4); the source's name (`src`, or `src<source>` for another)."""
    src = f"src{source or ''}"
    with WConfdClient(run / "wconfd.sock", name="bench-admin", timeout=120) as wc:
        wc.update_locks_waiting(ADMIN_LOCKS, timeout=30)
        for name in [src, *(f"t{source}-{i}" for i in range(targets))]:
            wc.add_object(kind="node", object={"name": name})
        for i in range(instances):
            wc.add_object(kind="instance", object={
                "name": f"vm{source}-{i:04d}", "primary_node": src, "memory": 32, "vcpus": 1,
                "admin_state": "up", "tags": list(tags),
                "nics": [{"mac": f"aa:00:{source + 1:02x}:{i >> 8:02x}:{i & 255:02x}:01"}],
            })  # fmt: skip
        wc.free_locks()
    return src


def follow(
    lc: LuxiClient,
    target: str,
    timeout: float,
    done: Callable[[DrainStatus], bool] = lambda s: s.status != "draining",
) -> tuple[DrainStatus, list[list[Any]]]:
    """Follow the drain (event-driven) until `done(status)` (by default: it ended)."""
    end = time.monotonic() + timeout
    since = 0
    events: list[list[Any]] = []
    while time.monotonic() < end:
        change = lc.wait_for_drain_change(target=target, since_event=since, timeout=10)
        if isinstance(change, str):
            continue
        events += change.events
        since = max([since, *(int(e[0]) for e in change.events)])
        if done(change.status):
            return change.status, events
    raise TimeoutError(f"{target}: not done after {timeout} s")


def max_overlap(intervals: list[tuple[float, float]]) -> int:
    edges = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def drain_node(
    run: Path, node: str, instances: int, max_parallel: int
) -> tuple[float, int, dict[str, Any]]:
    """Drain `node` until complete: (seconds, the most moves started and not ended at
    once, the drain record)."""
    with LuxiClient(run / "luxid.sock", timeout=120) as lc:
        t = time.perf_counter()
        lc.drain_node(node=node, deadline=None, max_parallel=max_parallel)
        status, _ = follow(lc, f"node/{node}", timeout=600)
        elapsed = time.perf_counter() - t
        assert status.status == "complete" and status.remaining == 0, status
        rows = lc.query_jobs(ids=status.jobs, fields=["ops", "start_ts", "end_ts", "status"])
        moves = [r for r in rows if r is not None and r[0][0]["OP_ID"] == "OP_INSTANCE_MIGRATE"]
        assert len(moves) == instances and all(r[3] == "success" for r in moves)
        overlap = max_overlap([(r[1], r[2]) for r in moves])
    with WConfdClient(run / "wconfd.sock", name="bench-reader") as wc:
        record = wc.get_object(kind="drain", key=f"node/{node}")
    return elapsed, overlap, record


def big_drain(run: Path, instances: int, max_parallel: int) -> dict[str, Any]:
    src = populate(run, instances, targets=instances // 100 + 1)
    elapsed, overlap, record = drain_node(run, src, instances, max_parallel)
    return {
        "instances": instances,
        "max_parallel": max_parallel,
        "complete_s": round(elapsed, 2),
        "moves_per_s": round(instances / elapsed, 1),
        "max_concurrent_moves": overlap,
        # What the drain record costs: its final size and how often luxid wrote it.
        "record_bytes": len(json.dumps(record)),
        "record_writes": record["serial_no"],
    }


def budget_drain(run: Path, instances: int, budget: int, max_parallel: int) -> dict[str, Any]:
    """A node whose instances are all in one budget of `budget`, drained with a wider
    max_parallel: the budget paces it (every member up, so only the moves disrupt)."""
    src = populate(run, instances, targets=instances // 100 + 1, source=1, tags=("bench",))
    with LuxiClient(run / "luxid.sock", timeout=120) as lc:
        lc.set_budget(name="bench", tags=["bench"], max_disrupted=budget)
    elapsed, overlap, _ = drain_node(run, src, instances, max_parallel)
    with LuxiClient(run / "luxid.sock", timeout=120) as lc:
        lc.delete_budget(name="bench")
    return {
        "instances": instances,
        "max_disrupted": budget,
        "max_parallel": max_parallel,
        "complete_s": round(elapsed, 2),
        "most_disrupted": overlap,
    }


def _late_ms(status: DrainStatus, events: list[list[Any]]) -> float:
    """How late this drain's deadline fired (events of an earlier drain of the same
    target come first and are skipped)."""
    fired = next(
        e
        for e in events
        if str(e[2]).startswith("deadline passed") and float(e[1]) >= status.started_at
    )
    assert status.deadline is not None
    return (float(fired[1]) - status.deadline) * 1000


def deadline_delays(run: Path, rounds: int) -> list[float]:
    """Queue drains whose deadline cancels a running job; then one node drain whose only
    move waits for its target's lock at the deadline."""
    delays: list[float] = []
    delay60 = {"OP_ID": "OP_TEST_DELAY", "duration": 60}
    with LuxiClient(run / "luxid.sock", timeout=120) as lc:
        for _ in range(rounds):
            lc.submit_job(ops=[delay60])
            started = lc.drain_queue(mode="hard", deadline=0.3)
            status, events = follow(lc, "queue", timeout=60)
            delays.append(_late_ms(status, events))
            assert status.deadline == started.deadline
            lc.undrain_queue()
        with WConfdClient(run / "wconfd.sock", name="bench-admin") as wc:
            wc.update_locks_waiting(ADMIN_LOCKS, timeout=30)
            wc.add_object(kind="node", object={"name": "d1", "mtotal": 1024})
            wc.add_object(kind="instance", object={
                "name": "late", "primary_node": "d1", "memory": 32, "admin_state": "up",
            })  # fmt: skip
            for obj in wc.list_objects(kind="node"):  # only d2 may take it
                if obj["name"] != "d1":
                    wc.update_object(kind="node", object={**obj, "offline": True})
            wc.add_object(kind="node", object={"name": "d2"})
            wc.free_locks()
        holder = lc.submit_job(ops=[{**delay60, "on_nodes": ["d2"]}])
        while lc.query_jobs(ids=[holder], fields=["status"])[0] != ["running"]:
            time.sleep(0.01)
        lc.drain_node(node="d1", deadline=1.0)
        status, events = follow(lc, "node/d1", 30, lambda s: s.deadline_reached)
        delays.append(_late_ms(status, events))
        lc.cancel_job(job_id=holder, kill=True)
    return delays


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=20)
    parser.add_argument("--deadlines", type=int, default=5, help="queue-drain deadline rounds")
    parser.add_argument("--budget", type=int, default=20, help="the budget run's max_disrupted")
    args = parser.parse_args()
    out: dict[str, Any] = {"bench": "drain", "cpus": cpu_count()}
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp, stack(Path(tmp)) as (run, _):
        out.update(big_drain(run, args.instances, args.max_parallel))
        delays = deadline_delays(run, args.deadlines)
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp, stack(Path(tmp)) as (run, _):
        out["budget"] = budget_drain(run, args.instances, args.budget, 50)
    # The same drain's cost with and without the budget, in this run.
    out["budget"]["ratio_to_unbudgeted"] = round(out["budget"]["complete_s"] / out["complete_s"], 2)
    out["deadline_delay_ms"] = {
        "median": round(statistics.median(delays), 1),
        "max": round(max(delays), 1),
        "samples": [round(d, 1) for d in delays],
    }
    out["targets"] = {"complete_s": 15.0, "deadline_delay_ms": 100.0, "budget_complete_s": 15.0}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
