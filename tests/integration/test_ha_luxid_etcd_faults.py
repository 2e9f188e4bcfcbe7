"""luxid when etcd members fail (docs/contracts.md#replicated-control-plane): one member killed, the
service goes on; two killed, calls fail cleanly (StorageError, or NotMaster once the node cannot
confirm its role) and luxid lives on; the members back, luxid serves again as the same master with
every acknowledged job.

Its own cluster: killing members must not disturb the other tests' cluster.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import EtcdCluster, running_cluster
from ha_luxid_testlib import EtcdStack
from luxid_testlib import delay

from client import LuxiClient, errors

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EtcdCluster]:
    (tmp_path / "etcd").mkdir()
    with running_cluster(tmp_path / "etcd") as c:
        yield c


def test_one_member_down_goes_on_two_fail_cleanly_and_back_resumes(
    daemon_factory: Any, cluster: EtcdCluster
) -> None:
    stack = EtcdStack(daemon_factory, cluster.endpoints)
    try:
        acked = [stack.submit(delay()) for _ in range(5)]
        leader = cluster.leader()
        leader.kill()  # the raft leader: etcd elects another, no call fails
        acked += [stack.submit(delay()) for _ in range(5)]
        for job_id in acked:
            stack.wait_final(job_id)

        survivors = [m for m in cluster.members if m.alive]
        survivors[0].kill()  # no quorum left
        refused: list[errors.RpcError] = []
        deadline = time.monotonic() + 30
        while len(refused) < 3 and time.monotonic() < deadline:
            try:
                acked.append(stack.submit(delay()))  # may still pass before etcd notices
            except (errors.StorageError, errors.NotMaster) as exc:
                refused.append(exc)
        assert len(refused) >= 3, "calls went on without an etcd quorum"
        assert stack.luxid.proc is not None and stack.luxid.proc.poll() is None
        assert stack.lc.ping() == "pong"

        for member in cluster.members:
            if not member.alive:
                member.start()
        cluster.wait_healthy()
        deadline = time.monotonic() + 60
        with LuxiClient(stack.luxid.socket, timeout=30) as lc:
            while True:
                try:
                    job_id = lc.submit_job(ops=[delay()])
                    break
                except (errors.StorageError, errors.NotMaster):
                    assert time.monotonic() < deadline, stack.luxid.log()[-3000:]
                    time.sleep(0.1)
            rows = lc.query_jobs(ids=acked, fields=["id", "status"])
            assert all(row is not None for row in rows), "an acknowledged job was lost"
            assert job_id > max(acked)
        stack.lc = LuxiClient(stack.luxid.socket, timeout=30)
        assert stack.wait_final(job_id) == "success"
    finally:
        stack.close()
