"""Every built-in opcode (docs/contracts.md#job-processes-and-opcodes) run by a real job process:
its effect on the wconfd configuration, and that it waits for the locks it needs (held here by a
test client)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def run(stack: Stack, *ops: dict[str, Any]) -> list[Any]:
    """Submit a job, expect success; its opcode results."""
    job_id = stack.submit(*ops)
    status = stack.wait_final(job_id)
    result = stack.field(job_id, "opresult")
    assert status == "success", result
    return list(result)


def fail(stack: Stack, op: dict[str, Any]) -> str:
    """Submit a one-opcode job, expect error; its message."""
    job_id = stack.submit(op)
    assert stack.wait_final(job_id) == "error"
    return str(stack.field(job_id, "opresult")[0])


def node(stack: Stack, name: str) -> dict[str, Any]:
    return dict(stack.wc.get_object("node", name))


def instance(stack: Stack, name: str) -> dict[str, Any]:
    return dict(stack.wc.get_object("instance", name))


def create(name: str, **params: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "memory": 128, "vcpus": 1,
            "disks": [{"size": 10}], **params}  # fmt: skip


def test_cluster_opcodes(stack):
    assert run(stack, {"OP_ID": "OP_CLUSTER_RENAME", "name": "prod"}) == ["prod"]
    assert stack.wc.get_object("cluster")["name"] == "prod"
    assert "already named" in fail(stack, {"OP_ID": "OP_CLUSTER_RENAME", "name": "prod"})
    (changes,) = run(
        stack,
        {"OP_ID": "OP_CLUSTER_SET_PARAMS", "max_running_jobs": 7, "mac_prefix": "AB:CD:EF",
         "tags": ["x", "y", "x"]},
    )  # fmt: skip
    assert sorted(changes) == [["mac_prefix", "ab:cd:ef"], ["max_running_jobs", 7],
                               ["tags", ["x", "y"]]]  # fmt: skip
    cluster = stack.wc.get_object("cluster")
    assert (cluster["max_running_jobs"], cluster["mac_prefix"]) == (7, "ab:cd:ef")
    # luxid follows the configuration: the new slot count is in force.
    stack.until(lambda: stack.lc.query_queue_info().max_running_jobs == 7)
    (verify,) = run(stack, {"OP_ID": "OP_CLUSTER_VERIFY"})
    assert verify == {"ok": True, "problems": []}


def test_node_opcodes(stack):
    (added,) = run(stack, {"OP_ID": "OP_NODE_ADD", "node_name": "n1", "primary_ip": "10.0.0.1"})
    assert added["name"] == "n1"
    n1 = node(stack, "n1")
    assert n1["primary_ip"] == "10.0.0.1" and not n1["offline"] and not n1["drained"]
    assert "already used" in fail(
        stack, {"OP_ID": "OP_NODE_ADD", "node_name": "n2", "primary_ip": "10.0.0.1"}
    )
    assert "not found" in fail(stack, {"OP_ID": "OP_NODE_ADD", "node_name": "n2", "group": "g9"})
    (changes,) = run(stack, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n1", "drained": True})
    assert ["drained", True] in changes and node(stack, "n1")["drained"] is True
    run(stack, {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n1", "drained": False})
    assert node(stack, "n1")["drained"] is False
    run(stack, {"OP_ID": "OP_NODE_REMOVE", "node_name": "n1"})
    assert [n["name"] for n in stack.wc.list_objects("node")] == []
    assert "not found" in fail(stack, {"OP_ID": "OP_NODE_REMOVE", "node_name": "n1"})


def test_instance_opcodes(stack):
    stack.add_nodes("n1", "n2", "n3")
    (made,) = run(stack, create("i1", pnode="n2", nics=2))
    assert made["primary_node"] == "n2" and len(made["macs"]) == 2
    inst = instance(stack, "i1")
    assert inst["primary_node"] == node(stack, "n2")["uuid"] and inst["admin_state"] == "up"
    assert sorted(nic["mac"] for nic in inst["nics"]) == sorted(made["macs"])
    assert stack.wc.list_reservations() == []  # the job's MAC reservations died with it
    (auto,) = run(stack, create("i2"))  # least loaded eligible node, by name: n1
    assert auto["primary_node"] == "n1"
    assert "already exists" in fail(stack, create("i1"))
    (moved,) = run(stack, {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i1",
                           "target_node": "n3"})  # fmt: skip
    assert moved == {"instance": "i1", "source": "n2", "target": "n3"}
    assert instance(stack, "i1")["primary_node"] == node(stack, "n3")["uuid"]
    job_id = stack.submit(
        {"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": "i1",
         "mode": "replace_on_primary", "duration": 0.01}
    )  # fmt: skip
    assert stack.wait_final(job_id) == "success"
    log = [e[3] for e in stack.field(job_id, "oplog")[0]]
    assert log == [
        "Replacing disks of instance 'i1' on node 'n3'",
        "Disks of instance 'i1' replaced",
    ]
    run(stack, {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "i1"})
    assert [i["name"] for i in stack.wc.list_objects("instance")] == ["i2"]


def test_node_evacuate_submits_one_migration_job_per_instance(stack):
    stack.add_nodes("n1", "n2")
    run(stack, create("a", pnode="n1"), create("b", pnode="n1"), create("c", pnode="n2"))
    job_id = stack.submit(
        {"OP_ID": "OP_NODE_EVACUATE", "node_name": "n1",
         "reason": [["test", "rate-limit:1:evac", 1]]}
    )  # fmt: skip
    assert stack.wait_final(job_id) == "success"
    (children,) = stack.field(job_id, "opresult")
    assert len(children) == 2
    for child in children:
        assert stack.wait_final(child) == "success"
        (op,) = stack.field(child, "ops")
        assert op["OP_ID"] == "OP_INSTANCE_MIGRATE"
        assert ["test", "rate-limit:1:evac", 1] in op["reason"]
    n1 = node(stack, "n1")["uuid"]
    assert [i["name"] for i in stack.wc.list_objects("instance") if i["primary_node"] == n1] == []


@pytest.mark.parametrize(
    ("held", "op"),
    [
        ("node/n1", {"OP_ID": "OP_NODE_ADD", "node_name": "n1"}),
        ("cluster/BGL", {"OP_ID": "OP_CLUSTER_RENAME", "name": "other"}),
        ("node/n9", delay(0, on_nodes=["n9"])),
        ("instance/i9", create("i9")),
    ],
)
def test_opcodes_wait_for_their_locks(stack, held, op):
    stack.add_nodes("n0")
    mode = "shared" if held == "cluster/BGL" else "exclusive"
    assert stack.wc.try_update_locks([[held, mode]]) == []
    job_id = stack.submit(op)
    stack.wait_status(job_id, "waiting")
    assert stack.field(job_id, "opstatus") == ["waiting"]
    stack.wc.free_locks()
    assert stack.wait_final(job_id) == "success"
