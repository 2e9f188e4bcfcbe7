"""luxid on a real three-member etcd with two nodes (docs/contracts.md#replicated-control-plane):
the standby answers NotMaster naming the master; kill -9 of the master (its luxid, its election, its
job processes) → the standby serves within 5 s with every acknowledged job, running jobs end `error`
"master failover", jobs queued behind them carry on, no opcode runs twice; a master that loses its
role without dying stops its job processes and turns standby.

wconfd's election is played by `etcd_testlib.Candidate` processes (one per node), so the
test can kill or freeze "the master's wconfd"; each node runs its own wconfd on local
files, which is all luxid needs of it here (its configuration, the job processes' locks).
"""

from __future__ import annotations

import contextlib
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import EtcdCluster, running_cluster
from ha_luxid_testlib import FAILOVER_LIMIT, Node, node_pair, rows
from ha_testlib import etcd_keys
from luxid_testlib import FINAL, delay, kill9, process_alive

from client import errors
from luxid.storage.etcd_keys import JobKeys

pytestmark = [pytest.mark.timeout(240), pytest.mark.slow]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(tmp_path_factory.mktemp("etcd")) as c:
        yield c


@pytest.fixture
def nodes(daemon_factory: Any, tmp_path: Path, cluster: EtcdCluster) -> Iterator[list[Node]]:
    with node_pair(daemon_factory, tmp_path, cluster) as made:
        yield made


def test_standby_names_the_master_and_only_the_master_serves(nodes: list[Node]) -> None:
    one, two = nodes
    assert not one.serving() and not two.serving()
    one.campaign().wait_for("elected", 10)
    one.wait_serving(10)
    two.campaign()
    with pytest.raises(errors.NotMaster) as refused:
        two.lc.submit_job(ops=[delay()])
    assert refused.value.master == "node1" and "the master is node1" in refused.value.message
    assert two.lc.ping() == "pong"
    job = one.lc.submit_job(ops=[delay()])
    assert job == 1


def test_kill9_of_the_master_loses_no_job_and_runs_no_opcode_twice(nodes: list[Node]) -> None:
    one, two = nodes
    one.campaign().wait_for("elected", 10)
    one.wait_serving(10)
    two.campaign()
    done = [one.lc.submit_job(ops=[delay(), delay()]) for _ in range(10)]
    for job_id in done:
        one.lc.wait_for_job_change(job_id=job_id, fields=["status"], prev_values=None,
                                   prev_log_serial=None, timeout=1)  # fmt: skip
    deadline = time.monotonic() + 30
    while any(v[0] not in FINAL for v in rows(one.lc, done, "status").values()):
        assert time.monotonic() < deadline
        time.sleep(0.05)
    before = rows(one.lc, done, "status", "opexec")
    running = one.lc.submit_job(ops=[delay(60, log_messages=["executing"])])
    behind = one.lc.submit_job(ops=[delay(depends=[[running, ["error", "success"]]])])
    queued_many = one.lc.submit_many_jobs(jobs=[[delay()] for _ in range(20)])
    acknowledged = [running, behind, *(job_id for _ok, job_id in queued_many)]
    # Wait for the opcode's own log line: its process writes it only once luxid answered
    # its `running` report, which luxid does once the running gate is in etcd (`opstatus`
    # shows "running" as soon as luxid took the report, before that commit).
    deadline = time.monotonic() + 30
    while not rows(one.lc, [running], "oplog")[running][0][0]:
        assert time.monotonic() < deadline
        time.sleep(0.05)
    (pid,) = rows(one.lc, [running], "process_id")[running]

    # The master's host dies: its election, its luxid and its job processes, all at once.
    assert one.candidate is not None
    one.candidate.signal(signal.SIGKILL)
    killed_at = time.monotonic()
    one.luxid.kill()
    kill9(pid)
    two.wait_serving(FAILOVER_LIMIT + 5)
    took = time.monotonic() - killed_at
    assert took <= FAILOVER_LIMIT, f"node2 served {took:.2f} s after the kill (limit 5 s)"
    assert "job(s) of node1" in two.luxid.log(), "the take-over names the previous master"

    after = rows(two.lc, done, "status", "opexec")
    assert after == before, "finished jobs changed or ran again on the new master"
    known = rows(two.lc, acknowledged, "status")
    assert sorted(known) == sorted(acknowledged), "an acknowledged job was lost"
    status, result = rows(two.lc, [running], "status", "opresult")[running]
    assert status == "error" and result == ["master failover"]
    for job_id in [behind, *acknowledged[2:]]:
        deadline = time.monotonic() + 60
        while (s := rows(two.lc, [job_id], "status")[job_id][0]) not in FINAL:
            assert time.monotonic() < deadline, f"job {job_id} still {s}"
            time.sleep(0.05)
        # Jobs the old master was running end "master failover" (none of its opcodes
        # runs again); the others, queued there, run here.
        result = rows(two.lc, [job_id], "opresult")[job_id][0]
        assert s == "success" or (s == "error" and result == ["master failover"]), (job_id, s)
    assert rows(two.lc, [behind], "status")[behind] == ["success"]
    assert two.lc.submit_job(ops=[delay()]) > max(acknowledged)


def test_a_master_that_loses_its_role_stops_its_job_processes(nodes: list[Node]) -> None:
    one, two = nodes
    one.campaign().wait_for("elected", 10)
    one.wait_serving(10)
    two.campaign()
    job = one.lc.submit_job(ops=[delay(120)])
    deadline = time.monotonic() + 30
    while (pid := rows(one.lc, [job], "process_id")[job][0]) is None or rows(
        one.lc, [job], "opstatus"
    )[job][0][0] != "running":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    assert one.candidate is not None
    one.candidate.signal(signal.SIGSTOP)  # its wconfd hangs: the lease lapses
    try:
        two.candidate and two.candidate.wait_for("elected", 15)
        two.wait_serving(10)
        deadline = time.monotonic() + 15
        while process_alive(pid):
            assert time.monotonic() < deadline, "the deposed master's job process still runs"
            time.sleep(0.1)
        with pytest.raises(errors.NotMaster) as refused:
            one.lc.query_queue_info()
        assert refused.value.master == "node2"
        status, result = rows(two.lc, [job], "status", "opresult")[job]
        assert status == "error" and result == ["master failover"]
    finally:
        with contextlib.suppress(OSError):
            one.candidate.signal(signal.SIGCONT)


def test_a_master_never_serves_fewer_job_ids_than_it_had(nodes: list[Node]) -> None:
    """etcd answering without jobs it acknowledged (a member that lost data, as etcd
    3.5.0-3.5.2 can: etcd-io/etcd#13766): the node's next term refuses to serve, so no job
    id is handed out twice; once etcd has the data back it serves it, ids going on."""
    one, _ = nodes
    one.campaign().wait_for("elected", 10)
    one.wait_serving(10)
    jobs = [one.lc.submit_job(ops=[delay()]) for _ in range(2)]
    assert jobs == [1, 2]
    assert one.candidate is not None
    one.candidate.close()  # its lease lapses: the term ends, its writes stop
    deadline = time.monotonic() + 15
    while one.serving():
        assert time.monotonic() < deadline, "the term did not end"
        time.sleep(0.05)
    root = JobKeys(one.prefix).root
    saved = etcd_keys(one.endpoints, root)
    etcd_keys(one.endpoints, root, "delete")
    one.campaign().wait_for("elected", 15)  # a new term, over the keys without the jobs
    deadline = time.monotonic() + 15
    while "has lost data" not in one.luxid.log() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert f"job ids up to 0 under {one.prefix}, but this node already had job 2" in one.luxid.log()
    with pytest.raises(errors.NotMaster):
        one.lc.submit_job(ops=[delay()])
    etcd_keys(one.endpoints, root, "put", saved)
    one.wait_serving(10)
    assert one.lc.submit_job(ops=[delay()]) == 3


def test_the_audit_log_survives_a_failover_which_it_records(nodes: list[Node]) -> None:
    one, two = nodes
    one.campaign().wait_for("elected", 10)
    one.wait_serving(10)
    two.campaign()
    job = one.lc.submit_job(ops=[delay()], actor="cli:dave")
    one.die()
    two.wait_serving(FAILOVER_LIMIT)
    found = [(e.method, e.target, e.actor, e.daemon) for e in two.lc.query_audit()]
    assert found == [
        ("failover", "node/node1", "node:node1", "luxid"),
        ("submit_job", f"job/{job}", "cli:dave", "luxid"),
        ("failover", "node/node2", "node:node2", "luxid"),
    ]
    seqs = [e.seq for e in two.lc.query_audit()]
    assert seqs == sorted(set(seqs))
