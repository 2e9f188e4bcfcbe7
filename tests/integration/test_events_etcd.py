"""Event indexes on the etcd store (docs/contracts.md#events): derived from the revision
of each write, they only grow and never repeat — on one master, and across a forced
failover: another node's luxid's first events come above every index the old master
handed out, and it still serves the old master's kept events; another node's wconfd
(which keeps no events in etcd) numbers its first above every index of the old term and
answers `gap` to a cursor of it.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import EtcdCluster, running_cluster
from ha_luxid_testlib import FAILOVER_LIMIT, Node, node_pair
from ha_testlib import WconfdNode, first_answer, wait_master
from luxid_testlib import FINAL, delay

from client import WConfdClient

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(tmp_path_factory.mktemp("etcd")) as c:
        yield c


@pytest.fixture
def nodes(daemon_factory: Any, tmp_path: Path, cluster: EtcdCluster) -> Iterator[list[Node]]:
    with node_pair(daemon_factory, tmp_path, cluster) as made:
        yield made


def events(node: Node) -> list[dict[str, Any]]:
    batch = node.lc.watch_events(after=0, topics=["job", "queue", "role"], timeout=0, limit=10000)
    return msgspec.to_builtins(batch.events)


def run_jobs(node: Node, count: int) -> None:
    ids = [node.lc.submit_job(ops=[delay()]) for _ in range(count)]
    deadline = time.monotonic() + 60
    for job_id in ids:
        while node.lc.query_jobs(ids=[job_id], fields=["status"])[0][0] not in FINAL:
            assert time.monotonic() < deadline
            time.sleep(0.05)


def test_indexes_grow_and_never_repeat_across_a_forced_failover(nodes: list[Node]) -> None:
    one, two = nodes
    one.campaign().wait_for("elected", 10)
    one.wait_serving(10)
    two.campaign()
    run_jobs(one, 5)
    one.lc.set_drain_flag(flag=True)
    one.lc.set_drain_flag(flag=False)
    before = events(one)
    indexes = [e["index"] for e in before]
    assert indexes == sorted(set(indexes)) and len(indexes) >= 17
    assert before[0]["topic"] == "role" and before[0]["key"] == "node/node1"

    one.die()
    two.wait_serving(FAILOVER_LIMIT + 5)
    run_jobs(two, 3)
    after = events(two)
    kept = [e for e in after if e["index"] <= indexes[-1]]
    assert kept == before, "the new master does not serve the old master's events as they were"
    new = [e for e in after if e["index"] > indexes[-1]]
    assert new and new[0]["topic"] == "role" and new[0]["key"] == "node/node2"
    every = [e["index"] for e in after]
    assert every == sorted(set(every)), "an index repeated or went back"
    top = two.lc.watch_events(after=0, topics=[], timeout=0).last
    assert top == every[-1]


def add_nodes(wc: WConfdClient, *names: str) -> None:
    for name in names:
        wc.update_locks_waiting(request=[[f"node/{name}", "exclusive"]], timeout=10)
        wc.add_object(kind="node", object={"name": name, "group": "default"})


def test_wconfd_indexes_grow_across_a_forced_failover(tmp_path: Path, etcd_store_url: str):
    nodes = [WconfdNode(tmp_path, f"node{i}", etcd_store_url) for i in (1, 2)]
    try:
        nodes[0].start()
        wait_master(nodes[:1])
        nodes[1].start()
        one, two = nodes
        with one.client("writer") as wc:
            add_nodes(wc, "a", "b", "c")
            before = wc.watch_events(after=0, topics=["config", "role"], timeout=0)
        indexes = [e.index for e in before.events]
        assert indexes == sorted(set(indexes)) and len(indexes) >= 4
        assert [e.key for e in before.events if e.topic == "config"] == [
            "node/a",
            "node/b",
            "node/c",
        ]
        one.kill()
        first_answer(two, timeout=10.0)
        with two.client("writer2") as wc:
            add_nodes(wc, "d")
            gone = wc.watch_events(after=before.last, topics=["config", "role"], timeout=0)
            assert gone.gap
            after = gone.events
            assert [e.key for e in after] == ["node/node2", "node/d"]
            assert after[0].index > before.last and after[1].index > after[0].index
    finally:
        for node in nodes:
            node.stop()
