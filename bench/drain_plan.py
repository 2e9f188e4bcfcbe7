"""Drain plans (docs/contracts.md#drain-plans): how long `plan_node_drain` takes for a node
of 1,000 instances (target ≤ 200 ms).

- `stub`: through real wconfd and luxid daemons and the sync stub, one call at a time —
  luxid reads the configuration from wconfd and runs the planner (what `lw node drain
  --dry-run` and the RAPI wait for).  The figure of the target (its p99).
- `core`: the pure planner alone on the same cluster, in this process (what is luxid's
  own share of the above).

The cluster is bench/drain.py's: node `src` with the instances (32 MiB, 1 CPU each) and one
empty node per 100 of them, written to wconfd directly.  Every instance has room, so the
plan has `instances` moves and nothing blocked.  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.append(sys.path.pop(0))  # bench/queue.py must not shadow the stdlib's queue

from _luxid import stack
from _util import cpu_count, summary
from drain import populate

from client import LuxiClient
from luxid.drains.plan import NO_BUDGETS, plan_node_drain
from luxid.drains.view import ClusterView, InstanceFacts, NodeFacts, place

TARGET_MS = 200.0


def view_of(instances: int, targets: int) -> ClusterView:
    """The cluster `populate` writes, as the planner sees it."""
    nodes = {name: NodeFacts(name=name) for name in ["src", *(f"t{i}" for i in range(targets))]}
    return ClusterView(
        nodes=nodes,
        instances={
            f"vm{i:04d}": InstanceFacts(
                name=f"vm{i:04d}", primary_node="src", admin_state="up", memory=32, vcpus=1
            )
            for i in range(instances)
        },
    )


def core(instances: int, targets: int, max_parallel: int, samples: int) -> dict[str, float]:
    view = view_of(instances, targets)
    times = []
    for _ in range(samples):
        t = time.perf_counter()
        plan = plan_node_drain(view, [], "src", max_parallel, place, budgets=NO_BUDGETS)
        times.append(time.perf_counter() - t)
        assert len(plan.moves) == instances and not plan.blocked, plan.blocked[:3]
    return summary(times)


def through_stub(run: Path, instances: int, max_parallel: int, samples: int) -> dict[str, Any]:
    with LuxiClient(run / "luxid.sock", timeout=120) as lc:
        plan = lc.plan_node_drain(node="src", max_parallel=max_parallel)  # warm up
        assert len(plan.moves) == instances and not plan.blocked, plan.blocked[:3]
        times = []
        for _ in range(samples):
            t = time.perf_counter()
            lc.plan_node_drain(node="src", max_parallel=max_parallel)
            times.append(time.perf_counter() - t)
        assert lc.query_drains() == []  # a plan changes nothing
    return {**summary(times), "waves": plan.waves, "targets_used": len({t for _, t in plan.moves})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--instances", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=20)
    parser.add_argument("--samples", type=int, default=50)
    args = parser.parse_args()
    targets = args.instances // 100 + 1
    out: dict[str, Any] = {"bench": "drain_plan", "cpus": cpu_count()}
    out["instances"], out["max_parallel"] = args.instances, args.max_parallel
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp, stack(Path(tmp)) as (run, _):
        populate(run, args.instances, targets)
        out["stub"] = through_stub(run, args.instances, args.max_parallel, args.samples)
    out["core"] = core(args.instances, targets, args.max_parallel, args.samples)
    out["target_ms"] = TARGET_MS
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
