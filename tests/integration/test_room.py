"""Room on nodes through the real daemons (docs/contracts.md#room-on-nodes): placement by free
memory and its OpPrereqError, moves that change nothing when the target is full, startup/shutdown/
failover, `lw node` capacity, the RAPI's htools fields — and Ganeti's own `hbal` and `hspace`
(Debian's ganeti-htools-3.0) planning a Lockwarden cluster over HTTPS.
"""

from __future__ import annotations

import dataclasses
import glob
import json
import re
import shutil
import ssl
import subprocess
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from client import errors
from client.capacity import config_rooms

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_jobproc_opcodes import fail as fails
from test_jobproc_opcodes import run as ok
from test_rapi import Rapi, self_signed
from test_rapi import stack as stack  # the fixture: wconfd + luxid, with RAPI users

pytestmark = pytest.mark.timeout(180)

LW = str(Path(sys.executable).parent / "lw")


def lw(stack: Stack, *args: str) -> str:
    """Run `lw` on the stack's directories, expect exit 0, return stdout."""
    done = subprocess.run(
        [LW, "--run-dir", str(stack.wconfd.run_dir), "--state-dir", str(stack.wconfd.state_dir),
         *args],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, f"lw {' '.join(args)} -> {done.returncode}\n{done.stderr}"
    return done.stdout


def add_node(name: str, mtotal: int, ctotal: int = 8) -> dict[str, Any]:
    return {"OP_ID": "OP_NODE_ADD", "node_name": name, "mtotal": mtotal, "ctotal": ctotal}


def create(name: str, memory: int, vcpus: int = 1, **params: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "memory": memory,
            "vcpus": vcpus, "disks": [{"size": 1024}], **params}  # fmt: skip


def placed(stack: Stack) -> dict[str, str]:
    """instance name -> primary node name."""
    nodes = {n["uuid"]: n["name"] for n in stack.wc.list_objects("node")}
    return {i["name"]: nodes[i["primary_node"]] for i in stack.wc.list_objects("instance")}


def test_creation_fails_without_room_and_succeeds_once_a_node_is_added(stack: Stack) -> None:
    ok(stack, add_node("node1", 4096), add_node("node2", 6144), add_node("node3", 8192))
    ok(stack, create("db", 6144, pnode="node3"), create("cache", 2048, pnode="node1"))
    # free: node1 2048, node2 6144, node3 2048
    (made,) = ok(stack, create("web1", 1024))
    assert made["primary_node"] == "node2"  # the most free memory
    # free: node1 2048, node2 5120, node3 2048
    message = fails(stack, create("web3", 8192, 2))
    assert message == (
        "no node has room for web3: it needs 8192 MiB and 2 CPUs; most free: node2 with 5120 MiB"
    )
    assert "web3" not in placed(stack)
    named = fails(stack, create("web3", 4096, 2, pnode="node1"))
    assert named == ("node node1 has no room for web3: it needs 4096 MiB and 2 CPUs; "
                     "it has 2048 MiB and 31 CPUs free")  # fmt: skip
    lw(stack, "node", "add", "node4", "--memory", "16G", "--cpus", "4")
    assert ok(stack, create("web3", 8192, 2))[0]["primary_node"] == "node4"
    rows = {r["name"]: r for r in json.loads(lw(stack, "node", "list", "--json"))}
    assert (rows["node4"]["mtotal"], rows["node4"]["mfree"], rows["node4"]["ctotal"]) == (
        16384,
        8192,
        4,
    )
    assert rows["node2"]["mfree"] == 5120 and rows["node2"]["pinst_cnt"] == 1
    header = lw(stack, "node", "list").splitlines()[0].split()
    assert {"MTOTAL", "MFREE", "CTOTAL", "PINST_CNT"} <= set(header)


def test_moves_to_a_full_node_fail_and_change_nothing(stack: Stack) -> None:
    ok(stack, add_node("node1", 8192), add_node("node2", 8192))
    ok(stack, create("big", 6144, pnode="node1"), create("small", 3072, pnode="node2"))
    serial = stack.wc.get_config()["serial_no"]
    for op_id in ("OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER"):
        named = fails(stack, {"OP_ID": op_id, "instance_name": "big", "target_node": "node2"})
        assert named.startswith("node node2 has no room for big: it needs 6144 MiB and 1 CPU;")
        chosen = fails(stack, {"OP_ID": op_id, "instance_name": "big"})
        assert chosen == ("no node has room for big: it needs 6144 MiB and 1 CPU; "
                          "most free: node2 with 5120 MiB")  # fmt: skip
    assert stack.wc.get_config()["serial_no"] == serial
    assert placed(stack) == {"big": "node1", "small": "node2"}
    # A stopped instance uses no room: it may move anywhere eligible, and then not start.
    ok(stack, {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "big"})
    assert stack.wc.get_object("instance", "big")["admin_state"] == "down"
    (moved,) = ok(stack, {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "big",
                          "duration": 0.05})  # fmt: skip
    assert moved == {"instance": "big", "source": "node1", "target": "node2"}
    message = fails(stack, {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "big"})
    assert message.startswith("node node2 has no room for big: it needs 6144 MiB")
    ok(stack, {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "small",
               "target_node": "node1"})  # fmt: skip
    ok(stack, {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "big"})
    assert stack.wc.get_object("instance", "big")["admin_state"] == "up"
    assert placed(stack) == {"big": "node2", "small": "node1"}


def test_get_node_rooms_sums_each_nodes_running_primaries(stack: Stack) -> None:
    """wconfd's get_node_rooms (what opcodes check room with) agrees with the placement rule
    applied to every instance, as nodes fill, instances stop, move and go."""

    def agrees() -> list[dict[str, Any]]:
        every = sorted(config_rooms(stack.wc.get_config()).values(), key=lambda r: r.name)
        got = [msgspec.structs.asdict(r) for r in stack.wc.get_node_rooms()]
        assert got == [dataclasses.asdict(r) for r in every]
        return got

    ok(stack, add_node("node1", 8192, ctotal=2), add_node("node2", 4096))
    ok(stack, create("a", 1024, vcpus=2, pnode="node1"), create("b", 2048, pnode="node1"))
    ok(stack, create("c", 512, pnode="node2"))
    rooms = agrees()
    assert [(r["name"], r["mused"], r["cused"], r["eligible"]) for r in rooms] == [
        ("node1", 3072, 3, True), ("node2", 512, 1, True)
    ]  # fmt: skip
    ok(stack, {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "b"})
    ok(stack, {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "c", "target_node": "node1"})
    ok(stack, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node2", "drained": True})
    rooms = agrees()
    assert [(r["name"], r["mused"], r["cused"], r["eligible"]) for r in rooms] == [
        ("node1", 1536, 3, True), ("node2", 0, 0, False)
    ]  # fmt: skip
    ok(stack, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "a"})
    agrees()
    (one,) = stack.wc.get_node_rooms(nodes=["node1", stack.wc.get_object("node", "node1")["uuid"]])
    assert (one.name, one.mused, one.cused, one.mtotal, one.ctotal) == ("node1", 512, 1, 8192, 2)
    with pytest.raises(errors.NotFound, match="node 'node9' not found"):
        stack.wc.get_node_rooms(nodes=["node9"])


def test_a_canceled_move_leaves_the_instance_where_it_was(stack: Stack) -> None:
    ok(stack, add_node("node1", 8192), add_node("node2", 8192))
    ok(stack, create("vm", 1024, pnode="node1"))
    job_id = stack.submit({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "vm",
                           "duration": 60})  # fmt: skip
    stack.wait_op_running(job_id)
    stack.lc.cancel_job(job_id=job_id, kill=False)
    assert stack.wait_final(job_id) == "canceled"
    assert placed(stack) == {"vm": "node1"}


def test_capacity_changes_and_the_rapi_fields(stack: Stack, daemon_factory: Any) -> None:
    ok(stack, add_node("node1", 8192, 2))
    ok(stack, create("vm", 4096, 3), create("off", 1024, 1))
    ok(stack, {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "off"})
    lw(stack, "node", "modify", "node1", "--memory", "6G")
    assert stack.wc.get_object("node", "node1")["mtotal"] == 6144
    message = fails(stack, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "node1", "mtotal": 2048})
    assert "using 4096 MiB" in message and stack.wc.get_object("node", "node1")["mtotal"] == 6144
    assert "too small" in fails(stack, {"OP_ID": "OP_CLUSTER_SET_PARAMS", "vcpu_ratio": 1})
    ok(stack, {"OP_ID": "OP_CLUSTER_SET_PARAMS", "vcpu_ratio": 2})  # 3 of 4 virtual CPUs
    assert "2048 MiB and 1 CPU free" in fails(stack, create("more", 128, 2, pnode="node1"))
    rapi = Rapi(daemon_factory)
    (node,) = rapi.get("/2/nodes?bulk=1")
    assert (node["mtotal"], node["mnode"], node["mfree"], node["ctotal"]) == (6144, 0, 2048, 2)
    assert node["ndparams"]["exclusive_storage"] is False
    vm, off = sorted(rapi.get("/2/instances?bulk=1"), key=lambda i: i["name"] != "vm")
    assert (vm["status"], vm["oper_ram"], vm["disk_template"]) == ("running", 4096, "sharedfile")
    assert (off["status"], off["oper_ram"]) == ("ADMIN_down", None)
    assert vm["beparams"]["vcpus"] == 3 and vm["disk.spindles"] == [None]
    (group,) = rapi.get("/2/groups?bulk=1")
    assert rapi.get("/2/groups") == [{"id": "default", "uri": "/2/groups/default"}]
    assert rapi.get("/2/groups/default") == group and group["node_list"] == ["node1"]
    assert group["uuid"] == node["group.uuid"] and group["alloc_policy"] == "preferred"
    assert group["ipolicy"]["disk-templates"][0] == "sharedfile"
    assert group["ipolicy"]["vcpu-ratio"] == 2.0
    info = rapi.get("/2/info")
    assert (info["master"], info["default_hypervisor"]) == ("node1", "fake")
    assert info["ipolicy"] == group["ipolicy"]
    assert rapi.call("GET", "/2/groups/nope").status == 404
    doc = rapi.get("/openapi.json", user=None)
    assert {"/2/groups", "/2/groups/{name}"} <= set(doc["paths"])
    assert "mfree" in doc["components"]["schemas"]["Node"]["required"]


# -- Ganeti's cluster tools --------------------------------------------------------------------


def htool(name: str) -> str:
    """The path of an htools program (Debian installs them under /usr/lib/ganeti/3.0)."""
    for path in [shutil.which(name), *sorted(glob.glob(f"/usr/lib/ganeti/*/usr/bin/{name}"))]:
        if path and Path(path).is_file():
            return path
    pytest.skip(f"Ganeti's {name} is not installed (apt-get install ganeti-htools-3.0)")


def run_tool(tool: str, url: str, *args: str) -> str:
    done = subprocess.run([tool, "-m", url, *args], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{tool} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


MOVE = re.compile(r"gnt-instance (?:migrate|failover) -f -n (\S+) (\S+)")


def test_hbal_and_hspace_plan_the_cluster_over_https(
    stack: Stack, daemon_factory: Any, tmp_path: Path
) -> None:
    hbal, hspace = htool("hbal"), htool("hspace")
    cert, key = self_signed(tmp_path)
    rapi = Rapi(
        daemon_factory,
        "--ssl-cert",
        str(cert),
        "--ssl-key",
        str(key),
        "--allow-anonymous-read",
        tls=ssl.create_default_context(cafile=str(cert)),
    )
    url = f"https://127.0.0.1:{rapi.port}"
    ok(stack, *(add_node(f"node{i}", 16384, 64) for i in (1, 2, 3)))
    ok(stack, *(create(f"vm{i}", 2048, pnode="node1") for i in range(6)))

    plan = run_tool(hbal, url, "-C")
    assert "Loaded 3 nodes, 6 instances" in plan
    moves = MOVE.findall(plan)
    assert moves, plan
    for target, instance in moves:
        lw(stack, "instance", "migrate", instance, "-n", target)
    counts: dict[str, int] = {}
    for node in placed(stack).values():
        counts[node] = counts.get(node, 0) + 1
    assert sorted(counts.values()) == [2, 2, 2], counts
    again = run_tool(hbal, url, "-C")
    assert MOVE.findall(again) == [], again

    nodes = rapi.get("/2/nodes?bulk=1")
    free = sum(n["mfree"] for n in nodes)
    assert free == 3 * 16384 - 6 * 2048
    std = rapi.get("/2/info")["ipolicy"]["std"]["memory-size"]
    for checks in ((), ("--no-capacity-checks",)):
        report = dict(
            line.split("=", 1)
            for line in run_tool(hspace, url, "--machine-readable", *checks).splitlines()
            if "=" in line
        )
        assert report["HTS_OK"] == "1"
        assert int(report["HTS_CLUSTER_MEM"]) == sum(n["mtotal"] for n in nodes)
        assert int(report["HTS_CLUSTER_VCPU"]) == sum(n["ctotal"] for n in nodes) * 4
        assert int(report["HTS_INI_MEM_FREE"]) == free
        assert int(report["HTS_INI_INST_CNT"]) == 6
        added = int(report["HTS_ALLOC_INSTANCES"])
        assert int(report["HTS_FIN_MEM_FREE"]) == free - added * std
        if checks:
            # Without N+1 reserve hspace fills every node with the policy's standard
            # instance (128 MiB, 1 CPU; 64 CPUs a node, so memory runs out first) until
            # less than one more fits: htools keep at least 1 MiB free on a node.
            assert report["HTS_ALLOC_FAIL_REASON"] == "FAILMEM"
            assert added == sum((n["mfree"] - 1) // std for n in nodes)
        else:
            # With it, one node's worth of memory stays free to fail a node over.
            assert report["HTS_ALLOC_FAIL_REASON"] == "FAILN1"
            assert int(report["HTS_FIN_MEM_FREE"]) >= max(n["mtotal"] for n in nodes) - 2 * 2048
