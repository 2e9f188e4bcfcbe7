"""20 forced failovers of luxid under load (docs/contracts.md#replicated-control-plane): two nodes
take turns as master while a client keeps submitting jobs to whichever serves; each failover kills
the master's host (election, luxid, job processes). Afterwards every acknowledged job is there,
every job ends success or "master failover", and no opcode ever started twice (an opcode seen
executing keeps its start time forever: a second run would give it a new one).
"""

from __future__ import annotations

import sys
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import EtcdCluster, running_cluster
from ha_luxid_testlib import FAILOVER_LIMIT, Node
from ha_testlib import job_starts
from luxid_testlib import FINAL, delay

from client import LuxiClient, errors

pytestmark = [pytest.mark.timeout(600), pytest.mark.slow]

FAILOVERS = 20


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(tmp_path_factory.mktemp("etcd")) as c:
        yield c


class Load:
    """Submits two-opcode jobs to whichever node serves; records the acknowledged ids."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.acked: list[int] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            for node in list(self.nodes):
                try:
                    with LuxiClient(node.luxid.socket, timeout=10) as lc:
                        answers = lc.submit_many_jobs(jobs=[[delay(0.05), delay(0.05)]] * 5)
                        self.acked.extend(job_id for ok, job_id in answers if ok)
                except (errors.RpcError, OSError):
                    continue
            time.sleep(0.02)


def check_once(seen: dict[tuple[int, int], float], now: dict[tuple[int, int], float]) -> None:
    """No opcode durably started gets a new start: it never ran a second time."""
    twice = {k: (seen[k], v) for k, v in now.items() if k in seen and seen[k] != v}
    assert not twice, f"opcodes started again: {twice}"
    seen.update(now)


def test_twenty_forced_failovers_lose_nothing_and_run_nothing_twice(
    daemon_factory: Any, tmp_path: Path, cluster: EtcdCluster
) -> None:
    prefix = f"/t/{uuid.uuid4().hex}"
    nodes = [Node(daemon_factory, tmp_path, cluster, prefix, f"node{i}") for i in (1, 2)]
    seen: dict[tuple[int, int], float] = {}
    took: list[float] = []
    load = None
    try:
        nodes[0].campaign().wait_for("elected", 10)
        nodes[0].wait_serving(10)
        nodes[1].campaign()
        load = Load(nodes)
        for _ in range(FAILOVERS):
            master = next(n for n in nodes if n.serving())
            other = next(n for n in nodes if n is not master)
            time.sleep(0.3)  # let jobs start and run on this master
            master.die()
            check_once(seen, job_starts(cluster.endpoints, prefix).exec_ts)
            killed = time.monotonic()
            other.wait_serving(FAILOVER_LIMIT + 10)
            took.append(time.monotonic() - killed)
            master.revive()
        load.stop.set()
        load.thread.join(30)
        final = next(n for n in nodes if n.serving())
        acked = sorted(load.acked)
        assert len(acked) > 100, "the load did not get through"
        deadline = time.monotonic() + 120
        while True:
            rows = final.lc.query_jobs(ids=acked, fields=["id", "status", "opresult"])
            assert all(row is not None for row in rows), "an acknowledged job was lost"
            if all(row[1] in FINAL for row in rows):
                break
            assert time.monotonic() < deadline, "jobs did not finish after the failovers"
            time.sleep(0.2)
        for job_id, status, results in rows:
            assert status == "success" or "master failover" in results, (job_id, status, results)
        check_once(seen, job_starts(cluster.endpoints, prefix).exec_ts)
        assert max(took) <= FAILOVER_LIMIT, f"failover times {took}"
    finally:
        if load is not None:
            load.stop.set()
        for node in nodes:
            node.close()
