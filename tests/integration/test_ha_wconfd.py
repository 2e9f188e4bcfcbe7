"""wconfd on a real three-member etcd with two nodes (docs/contracts.md#replicated-control-plane):
roles, NotMaster naming the master, failover after kill -9 within 5 s losing nothing acknowledged,
fencing of a master that hung past its lease, and etcd members failing under it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from ha_testlib import (
    WconfdNode,
    etcd_keys,
    first_answer,
    store_url,
    wait_master,
    wconfd_pair,
)

from client import WConfdClient, errors
from client.identity import cli_actor

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]


@pytest.fixture
def two_nodes(tmp_path: Path, etcd_store_url: str) -> Iterator[list[WconfdNode]]:
    with wconfd_pair(tmp_path, etcd_store_url) as nodes:
        yield nodes


def add_node(wc: WConfdClient, name: str) -> None:
    wc.update_locks_waiting(request=[[f"node/{name}", "exclusive"]], timeout=10)
    wc.add_object(kind="node", object={"name": name, "group": "default"})


def node_names(wc: WConfdClient) -> set[str]:
    return {n["name"] for n in wc.list_objects(kind="node")}


def test_one_master_the_standby_names_it(two_nodes):
    node1, node2 = two_nodes
    assert wait_master(two_nodes) is node1
    r1, r2 = node1.role(), node2.role()
    assert r1 == {"node": "node1", "role": "master", "master": "node1", "term": r1["term"]}
    assert r1["term"] > 0
    assert r2 == {"node": "node2", "role": "standby", "master": "node1", "term": r1["term"]}
    with node2.client() as wc:
        assert wc.ping() == "pong"
        with pytest.raises(errors.NotMaster) as err:
            wc.list_locks()
        assert err.value.data["master"] == "node1"
        assert err.value.code == -32070
        with pytest.raises(errors.NotMaster):
            wc.get_config()
    with node1.client() as wc:
        add_node(wc, "n1")
        assert "n1" in node_names(wc)
        assert wc.get_metrics()["lockwarden_master"] == [[{"node": "node1"}, 1]]


def test_kill9_of_the_master_standby_serves_within_5s_with_everything_acknowledged(two_nodes):
    node1, node2 = two_nodes
    wait_master(two_nodes)
    early = node2.client("early")  # identified on the standby, before the failover
    assert early.get_role().role == "standby"
    with node1.client("writer") as wc:
        for i in range(20):
            add_node(wc, f"n{i:02d}")
        wc.reserve(namespace="ip", value="10.0.0.1")
        held = wc.list_locks()
        assert len(held) == 20
        serial = wc.get_config()["serial_no"]
        node1.kill()
    took = first_answer(node2, timeout=10.0)
    assert took <= 5.0, f"failover took {took:.2f} s"
    with node2.client("reader") as wc:
        config = wc.get_config()
        assert {n["name"] for n in config["nodes"].values()} == {f"n{i:02d}" for i in range(20)}
        assert config["serial_no"] == serial
        # The writer's locks and reservations were granted on node1: released.
        assert wc.list_all_locks().locks == []
        assert wc.list_reservations() == []
        assert node2.role()["role"] == "master"
        assert wc.get_metrics()["lockwarden_master"] == [[{"node": "node2"}, 1]]
        add_node(wc, "after")
        assert "after" in node_names(wc)
        # The audit log came through the failover, which it records.
        audit = [(e.method, e.target, e.actor) for e in wc.query_audit(limit=100)]
        assert audit[0] == ("failover", "node/node1", "node:node1")
        assert [a[:2] for a in audit[1:21]] == [("add_object", f"node/n{i:02d}") for i in range(20)]
        assert audit[21:] == [
            ("failover", "node/node2", "node:node2"),
            ("add_object", "node/after", f"uid:{os.getuid()}"),
        ]
    # The connection identified while standby is served on the same identity now.
    assert early.try_update_locks(request=[["node/early", "exclusive"]]) == []
    assert early.list_locks() == [["node/early", "exclusive"]]
    early.close()


def test_calls_waiting_through_a_takeover_are_answered_from_the_new_terms_state(two_nodes):
    """Calls that reach the standby while it takes over wait for its role to settle and are
    then answered by the new term's state, never by what the node held as standby (which
    answered NotFound for an object the master had)."""
    node1, node2 = two_nodes
    wait_master(two_nodes)
    with node1.client("writer") as wc:
        add_node(wc, "a")
    answers: list[object] = []

    def ask() -> None:
        deadline = time.monotonic() + 15
        with node2.client("asker", timeout=10) as wc:
            while time.monotonic() < deadline:
                try:
                    answers.append(wc.get_object(kind="node", key="a")["name"])
                    return
                except (errors.NotMaster, errors.ConnectionError) as exc:
                    answers.append(type(exc).__name__)
                except errors.RpcError as exc:  # NotFound: the standby's state answered
                    answers.append(exc)
                    return

    askers = [threading.Thread(target=ask) for _ in range(8)]
    node1.kill()
    for t in askers:
        t.start()
    for t in askers:
        t.join()
    assert [a for a in answers if a not in ("NotMaster", "ConnectionError")] == ["a"] * 8
    # A handed-over call is counted once, by the handler that answered it.
    with node2.client("metrics") as wc:
        calls = wc.get_metrics()["lockwarden_rpc_requests_total"]
    outcomes = {lab["outcome"]: n for lab, n in calls if lab["method"] == "get_object"}
    assert outcomes.get("ok") == 8 and set(outcomes) <= {"ok", "NotMaster"}, outcomes


def test_kill9_and_immediate_restart_of_the_master_resumes_its_term(two_nodes):
    """Restarts on etcd (docs/contracts.md#reliability-and-security): a wconfd killed and restarted
    within its lease serves the same term (nothing following the leader key, such as its luxid, sees
    a failover), and a live client's locks are still held; the standby never takes over."""
    node1, node2 = two_nodes
    wait_master(two_nodes)
    term = node1.role()["term"]
    holder = node1.client("holder", timeout=30.0)  # this test process: alive throughout
    assert holder.try_update_locks(request=[["node/kept", "exclusive"]]) == []
    node1.kill()
    node1.start()
    assert wait_master(two_nodes) is node1
    assert node1.role() == {"node": "node1", "role": "master", "master": "node1", "term": term}
    assert node2.role()["role"] == "standby"
    assert holder.list_locks() == [["node/kept", "exclusive"]]
    with node1.client("after") as wc:
        add_node(wc, "after")  # the resumed term writes (its fence is the same token)
        assert "after" in node_names(wc)
    assert "resumes its term" in node1.log()
    holder.close()


def test_a_master_stopped_past_its_lease_is_fenced_and_turns_standby(two_nodes):
    node1, node2 = two_nodes
    wait_master(two_nodes)
    old = node1.client("old")
    add_node(old, "before")
    old.update_locks_waiting(request=[["node/late", "exclusive"]], timeout=10)
    node1.send_signal(signal.SIGSTOP)
    try:
        took = first_answer(node2, timeout=10.0)
        assert took <= 5.0
        # A write sent to the stopped old master sits in its socket until it wakes.
        outcome: dict[str, Any] = {}

        def late_write() -> None:
            try:
                outcome["result"] = old.add_object(
                    kind="node", object={"name": "late", "group": "default"}
                )
            except errors.RpcError as exc:
                outcome["error"] = exc

        writer = threading.Thread(target=late_write)
        writer.start()
        time.sleep(0.3)
    finally:
        node1.send_signal(signal.SIGCONT)
    writer.join(15)
    assert isinstance(outcome.get("error"), errors.NotMaster), outcome
    # It names the master etcd's key names: never itself, never null while one serves.
    assert outcome["error"].data["master"] == "node2"
    assert wait_master(two_nodes) is node2
    with node1.client("again") as wc, pytest.raises(errors.NotMaster) as again:
        wc.list_locks()
    assert again.value.data["master"] == "node2"
    with node2.client("reader") as wc:
        assert node_names(wc) == {"before"}
    role = node1.role()
    assert role["role"] == "standby" and role["master"] == "node2"
    old.close()


def test_etcd_members_fail_under_the_master(tmp_path: Path):
    import etcd_testlib

    with etcd_testlib.running_cluster(tmp_path) as cluster:
        node = WconfdNode(tmp_path, "node1", store_url(cluster.endpoints, "/faults"))
        try:
            node.start()
            wait_master([node])
            wc = node.client("w", timeout=30.0)
            add_node(wc, "a")
            # One member down (the raft leader, the worst one): service continues.
            cluster.leader().kill()
            add_node(wc, "b")
            assert node_names(wc) == {"a", "b"}
            # Two down: no quorum. Calls fail quickly with a clear error, write nothing.
            for m in [m for m in cluster.members if m.alive][:1]:
                m.kill()
            t0 = time.monotonic()
            with pytest.raises((errors.StorageError, errors.NotMaster)):
                add_node(wc, "c")
            assert time.monotonic() - t0 < 8.0
            # Restored: a master serves again, with what was acknowledged and not "c".
            for m in cluster.members:
                if not m.alive:
                    m.start()
            cluster.wait_healthy(cluster.members)
            first_answer(node, timeout=20.0)
            # node/c may have been granted before the write failed: let it go (the
            # client lives, so the new term kept its locks).
            wc.free_locks()
            with node.client("after", timeout=30.0) as again:
                assert node_names(again) == {"a", "b"}
                add_node(again, "c")
                assert node_names(again) == {"a", "b", "c"}
            wc.close()
        finally:
            node.stop()


def test_a_master_never_serves_an_older_config_than_it_had(tmp_path: Path):
    """etcd answering without what it acknowledged (a member that lost data, as etcd
    3.5.0-3.5.2 can: etcd-io/etcd#13766): the node's next term refuses to serve that, and
    writes no fresh config over it; once etcd has the data back, it serves it."""
    import etcd_testlib

    with etcd_testlib.running_cluster(tmp_path) as cluster:
        node = WconfdNode(tmp_path, "node1", store_url(cluster.endpoints, "/lost"))
        try:
            node.start()
            wait_master([node])
            with node.client("w") as wc:
                add_node(wc, "a")
                add_node(wc, "b")
                wc.free_locks()
            config = b"/lost/config/"
            saved = etcd_keys(cluster.endpoints, config)
            etcd_keys(cluster.endpoints, config, "delete")
            with node.client("w") as wc:
                wc.step_down(wait=0)
            deadline = time.monotonic() + 20
            while "has lost data" not in node.log() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert "answered with no configuration under /lost" in node.log()
            assert etcd_keys(cluster.endpoints, config) == []  # no fresh config written over
            with node.client("w") as wc, pytest.raises(errors.NotMaster):
                wc.list_objects(kind="node")
            etcd_keys(cluster.endpoints, config, "put", saved)
            first_answer(node, timeout=20.0)
            with node.client("after") as wc:
                assert node_names(wc) == {"a", "b"}
        finally:
            node.stop()


def test_a_config_changed_behind_the_master_is_checked_before_it_is_served(tmp_path: Path):
    """A new term trusts the objects it loads only when the config's digest says they are
    as a master wrote them: a node renamed to a forbidden name with etcdctl is caught by
    the checks (the node does not serve it), and served again once put right; a load of
    what the master itself wrote checks nothing again."""
    import etcd_testlib

    unchecked = "checking every object as it loads"
    with etcd_testlib.running_cluster(tmp_path) as cluster:
        node = WconfdNode(tmp_path, "node1", store_url(cluster.endpoints, "/digest"))
        try:
            node.start()
            wait_master([node])
            with node.client("w") as wc:
                add_node(wc, "a")
                add_node(wc, "b")
                wc.free_locks()
                wc.step_down(wait=0)
            first_answer(node, timeout=20.0)
            assert unchecked not in node.log()  # the term's own writes: trusted
            nodes = [
                kv
                for kv in etcd_keys(cluster.endpoints, b"/digest/config/node/")
                if b'"name":"b"' in kv.value
            ]
            forged = [type(kv)(key=kv.key, value=kv.value.replace(b'"name":"b"', b'"name":"<b>"'))
                      for kv in nodes]  # fmt: skip
            etcd_keys(cluster.endpoints, b"", "put", forged)
            with node.client("w") as wc:
                wc.step_down(wait=0)
            deadline = time.monotonic() + 20
            while "taking over failed" not in node.log() and time.monotonic() < deadline:
                time.sleep(0.05)
            assert unchecked in node.log()
            assert "<b>" in node.log().split("taking over failed", 1)[1]
            with node.client("w") as wc, pytest.raises(errors.NotMaster):
                wc.list_objects(kind="node")
            etcd_keys(cluster.endpoints, b"", "put", nodes)
            first_answer(node, timeout=20.0)
            with node.client("after") as wc:
                assert node_names(wc) == {"a", "b"}
            assert node.log().count(unchecked) == 1  # put right: trusted again
            # A meta without a digest (as an older release wrote it): checked once; the
            # next config write vouches for what the checks passed.
            (meta,) = etcd_keys(cluster.endpoints, b"/digest/config/meta")
            bare = json.loads(meta.value)
            del bare["digest"]
            etcd_keys(
                cluster.endpoints,
                b"",
                "put",
                [type(meta)(key=meta.key, value=json.dumps(bare).encode())],
            )
            for step in range(2):
                with node.client("w") as wc:
                    wc.step_down(wait=0)
                first_answer(node, timeout=20.0)
                assert node.log().count(unchecked) == 2
                with node.client("w") as wc:
                    add_node(wc, f"c{step}")
                    wc.free_locks()
            # An object the checks pass only as they rewrite it (an address not in its
            # canonical text): every load checks it again, and each serves it rewritten.
            (a,) = [kv for kv in etcd_keys(cluster.endpoints, b"/digest/config/node/")
                    if b'"name":"a"' in kv.value]  # fmt: skip
            odd = a.value.replace(b'"primary_ip":null', b'"primary_ip":"2001:DB8::0001"')
            assert odd != a.value
            etcd_keys(cluster.endpoints, b"", "put", [type(a)(key=a.key, value=odd)])
            for step in range(2):
                with node.client("w") as wc:
                    wc.step_down(wait=0)
                first_answer(node, timeout=20.0)
                assert node.log().count(unchecked) == 3 + step
                with node.client("w") as wc:
                    assert wc.get_object("node", "a")["primary_ip"] == "2001:db8::1"
                    add_node(wc, f"d{step}")
                    wc.free_locks()
        finally:
            node.stop()


def lw(node_or_run_dir: WconfdNode | Path, *args: str) -> subprocess.CompletedProcess[str]:
    run_dir = (
        node_or_run_dir.run_dir if isinstance(node_or_run_dir, WconfdNode) else node_or_run_dir
    )
    return subprocess.run(
        [str(Path(sys.executable).parent / "lw"), "--run-dir", str(run_dir), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_lw_names_the_master_shows_roles_and_fails_over(two_nodes):
    node1, node2 = two_nodes
    wait_master(two_nodes)
    refused = lw(node2, "lock", "list")
    assert refused.returncode == 1
    assert "this node is not the master; the master is node1" in refused.stderr
    on_standby = lw(node2, "cluster", "role", "--json")
    assert on_standby.returncode == 0, on_standby.stderr
    assert [r["node"] for r in json.loads(on_standby.stdout)] == ["node2"]
    table = lw(node1, "cluster", "role", "--no-headers", "--separator", "|")
    assert table.returncode == 0, table.stderr
    rows = [line.split("|") for line in table.stdout.splitlines()]
    term = node1.role()["term"]
    assert rows == [
        ["node1", "master", "node1", str(term)],
        ["node2", "standby", "node1", str(term)],
    ]
    moved = lw(node1, "cluster", "failover", "--wait", "10")
    assert moved.returncode == 0, moved.stderr
    assert "the master is now node2" in moved.stdout
    assert wait_master(two_nodes) is node2
    assert lw(node2, "lock", "list").returncode == 0
    with node2.client("reader") as wc:  # the step down is on record, then the takeover
        audit = [(e.method, e.target, e.actor) for e in wc.query_audit()]
    assert audit[-2:] == [
        ("step_down", "node/node1", cli_actor()),
        ("failover", "node/node2", "node:node2"),
    ]


def test_lw_cluster_on_local_files(wconfd):
    table = lw(wconfd.run_dir, "cluster", "role", "--json")
    assert table.returncode == 0, table.stderr
    (row,) = json.loads(table.stdout)
    assert row["role"] == "master" and row["term"] == 0 and row["master"] == row["node"]
    refused = lw(wconfd.run_dir, "cluster", "failover")
    assert refused.returncode == 1
    assert "no other node can take over" in refused.stderr


@pytest.mark.parametrize("wconfd", ["etcd"], indirect=True)
def test_lw_cluster_failover_with_no_standby_up_answers_once_the_node_is_master_again(wconfd):
    """No standby to take over: the node pauses one lease TTL, wins again, and the command
    says so then, not after all of --wait."""
    started = time.monotonic()
    alone = lw(wconfd.run_dir, "cluster", "failover", "--wait", "60")
    assert alone.returncode == 1
    assert "no other node took over while it paused" in alone.stderr
    assert time.monotonic() - started < 30
    with WConfdClient(wconfd.socket, name="after") as wc:
        assert wc.get_role().role == "master"


@pytest.mark.parametrize("wconfd", ["etcd"], indirect=True)
def test_a_change_too_large_for_one_transaction_fails_alone(wconfd):
    """etcd caps a transaction's operations: a lock request that needs more fails with
    StorageError, changes nothing, and the master serves on (releasing many is cheap)."""
    with WConfdClient(wconfd.socket, name="big") as wc:
        many = [[f"node/n{i:03d}", "shared"] for i in range(200)]
        with pytest.raises(errors.StorageError, match="split it into smaller calls"):
            wc.try_update_locks(many)
        assert wc.list_locks() == []
        for start in range(0, 200, 100):
            assert wc.try_update_locks(many[start : start + 100]) == []
        assert len(wc.list_locks()) == 200
        wc.try_update_locks([[f"node/n{i:03d}", "release"] for i in range(150)])
        assert len(wc.list_locks()) == 50
        wc.free_locks()
        assert wc.list_locks() == []


def test_repeated_failovers_under_load_lose_no_acknowledged_write(two_nodes):
    """Forced failovers (kill -9 of the master, which comes back as a standby) while a
    client keeps writing config objects and lock changes to whichever node is master:
    every write a master acknowledged is in the config afterwards."""
    failovers = 6
    acked: list[str] = []
    stop = threading.Event()
    failures: list[BaseException] = []

    def load() -> None:
        i = 0
        while not stop.is_set():
            for node in two_nodes:
                try:
                    with node.client(f"load{i}", timeout=5.0) as wc:
                        while not stop.is_set():
                            i += 1
                            made = wc.add_object(kind="filter", object={"priority": i % 100})
                            acked.append(made["uuid"])
                            wc.try_update_locks([[f"node/l{i % 10}", "exclusive"]])
                            wc.try_update_locks([[f"node/l{i % 10}", "release"]])
                except (errors.NotMaster, errors.ConnectionError, errors.StorageError):
                    continue  # an answer that is not an acknowledgement: try the other node
                except BaseException as exc:  # anything else is a bug: fail the test
                    failures.append(exc)
                    return
            time.sleep(0.01)

    writer = threading.Thread(target=load)
    wait_master(two_nodes)
    writer.start()
    try:
        for _ in range(failovers):
            time.sleep(0.5)
            master = wait_master(two_nodes)
            standby = two_nodes[1] if master is two_nodes[0] else two_nodes[0]
            master.kill()
            assert first_answer(standby, timeout=10.0) <= 5.0
            master.start()
        time.sleep(0.5)
    finally:
        stop.set()
        writer.join(30)
    assert not failures, failures
    assert len(acked) > 50
    with wait_master(two_nodes).client("check") as wc:
        stored = {f["uuid"] for f in wc.list_objects(kind="filter")}
    missing = [u for u in acked if u not in stored]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged writes lost"
