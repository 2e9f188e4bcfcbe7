"""Through stalls (docs/operations.md#stalls), with real daemons on a real three-member etcd:
a master's wconfd paused for less than its lease keeps master and term; a master's luxid
that hangs is replaced within 8 s and, resumed, answers NotMaster naming the new master;
a step-down leaves its jobs as a failover does (running: `error` "master failover"; queued:
carried on), never "job process died", also when the same node wins the key again. The wconfd stalled past its lease is in
test_ha_wconfd.py."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from ha_testlib import ControlNode, WconfdNode, wait_master, wconfd_pair
from luxid_testlib import FINAL, delay

from client import LuxiClient, errors

pytestmark = [pytest.mark.timeout(180)]

LUXID_STALL = 15.0
LUXID_REPLACED_WITHIN = 8.0


@pytest.fixture
def two_wconfds(tmp_path: Path, etcd_store_url: str) -> Iterator[list[WconfdNode]]:
    with wconfd_pair(tmp_path, etcd_store_url) as nodes:
        yield nodes


@pytest.fixture
def control_nodes(tmp_path: Path, etcd_store_url: str) -> Iterator[list[ControlNode]]:
    nodes = [ControlNode(tmp_path, f"node{i}", etcd_store_url) for i in (1, 2)]
    try:
        nodes[0].start().wait_serving(20)
        nodes[1].start()
        yield nodes
    finally:
        for n in nodes:
            n.stop()


def test_a_master_wconfd_paused_within_its_lease_keeps_master_and_term(two_wconfds):
    node1, node2 = two_wconfds
    assert wait_master(two_wconfds) is node1
    term = node1.role()["term"]
    node1.send_signal(signal.SIGSTOP)
    time.sleep(1.5)  # past the renewal due, within the lease etcd counts
    node1.send_signal(signal.SIGCONT)
    with node1.client("after") as wc:
        wc.list_locks()  # served: by its clock, or once etcd said the lease lives
    assert node1.role() == {"node": "node1", "role": "master", "master": "node1", "term": term}
    assert node2.role()["master"] == "node1"
    assert "steps down as master" not in node1.log()


def rows(lc: LuxiClient, ids: list[int], *fields: str) -> dict[int, list]:
    return {r[0]: r[1:] for r in lc.query_jobs(ids=ids, fields=["id", *fields]) if r is not None}


def wait_running(lc: LuxiClient, job: int) -> None:
    """Until the job's opcode logged from its process (its start is in etcd)."""
    deadline = time.monotonic() + 30
    while not rows(lc, [job], "oplog")[job][0][0]:
        assert time.monotonic() < deadline, f"job {job} did not start"
        time.sleep(0.05)


def wait_final(lc: LuxiClient, ids: list[int], timeout: float = 60) -> dict[int, list]:
    deadline = time.monotonic() + timeout
    while True:
        found = rows(lc, ids, "status", "opresult")
        if all(v[0] in FINAL for v in found.values()):
            return found
        assert time.monotonic() < deadline, f"jobs not finished: {found}"
        time.sleep(0.1)


@pytest.mark.slow
def test_a_step_down_ends_running_jobs_as_a_failover_and_carries_queued_ones(control_nodes):
    node1, node2 = control_nodes
    lc = LuxiClient(node1.luxid.socket, timeout=30)
    running = lc.submit_job(ops=[delay(60, log_messages=["executing"])])
    behind = lc.submit_job(ops=[delay(depends=[[running, ["error", "success"]]])])
    wait_running(lc, running)
    with node1.wconfd.client("operator") as wc:
        assert wc.step_down(wait=10).master == "node2"
    node2.wait_serving(10)
    with LuxiClient(node2.luxid.socket, timeout=30) as lc2:
        done = wait_final(lc2, [running, behind])
    assert done[running] == ["error", ["master failover"]]
    assert done[behind][0] == "success"
    with pytest.raises(errors.NotMaster) as refused:
        lc.query_queue_info()
    assert refused.value.master == "node2"
    assert "job process died" not in node1.luxid.log() + node2.luxid.log()
    lc.close()


@pytest.mark.slow
def test_a_node_that_steps_down_and_wins_again_ends_its_running_jobs_as_a_failover(
    tmp_path: Path, etcd_store_url: str
):
    node = ControlNode(tmp_path, "solo", etcd_store_url).start()
    try:
        node.wait_serving(20)
        lc = LuxiClient(node.luxid.socket, timeout=30)
        running = lc.submit_job(ops=[delay(60, log_messages=["executing"])])
        behind = lc.submit_job(ops=[delay(depends=[[running, ["error", "success"]]])])
        wait_running(lc, running)
        term = node.wconfd.role()["term"]
        with node.wconfd.client("operator") as wc:
            wc.step_down(wait=0)
        node.wait_serving(15)  # the only node: it campaigns again one TTL later and wins
        assert node.wconfd.role()["term"] > term
        done = wait_final(lc, [running, behind])
        assert done[running] == ["error", ["master failover"]]
        assert done[behind][0] == "success"
        assert "job process died" not in node.luxid.log()
        lc.close()
    finally:
        node.stop()


@pytest.mark.slow
def test_a_hung_master_luxid_is_replaced_and_resumed_names_the_new_master(control_nodes):
    node1, node2 = control_nodes
    os.kill(node1.luxid.pid, signal.SIGSTOP)
    stopped = time.monotonic()
    try:
        answered = None
        while time.monotonic() - stopped < LUXID_STALL:
            try:
                with LuxiClient(node2.luxid.socket, timeout=2) as lc:
                    lc.submit_job(ops=[delay()])
                answered = answered or time.monotonic() - stopped
            except (errors.NotMaster, errors.ConnectionError):
                pass
            time.sleep(0.1)
        assert answered is not None and answered <= LUXID_REPLACED_WITHIN, answered
    finally:
        os.kill(node1.luxid.pid, signal.SIGCONT)
    assert "has not answered for" in node1.wconfd.log()
    with LuxiClient(node1.luxid.socket, timeout=10) as lc:
        with pytest.raises(errors.NotMaster) as refused:
            lc.submit_job(ops=[delay()])
        assert refused.value.master == "node2"
        assert lc.get_role().role == "standby"
