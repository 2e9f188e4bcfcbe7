"""Room on nodes in the built-in opcodes (docs/contracts.md#room-on-nodes): placement by free
memory, OpPrereqError naming what is short, startup/shutdown/failover, capacity changes."""

from __future__ import annotations

from typing import Any

import pytest

from jobproc.opcodes import OpExecError
from jobproc.opcodes.errors import ECODE_NORES, OpPrereqError
from jobproc.opcodes.registry import REGISTRY

from .fakes import EventSleepContext, FakeContext, acquire, run


def small_cluster(ctx: FakeContext | None = None) -> FakeContext:
    """node1 4096 MiB/1 CPU (web1 up: 3072 MiB, 2 vCPUs), node2 8192 MiB (web2 up:
    6144 MiB), node3 4096 MiB empty; vcpu ratio 4 (the default policy)."""
    c = ctx or FakeContext()
    c.node("node1", mtotal=4096, ctotal=1)
    c.node("node2", mtotal=8192, ctotal=8)
    c.node("node3", mtotal=4096, ctotal=8)
    c.instance("web1", "node1", memory=3072, vcpus=2)
    c.instance("web2", "node2", memory=6144)
    return c


def create(name: str, memory: int, vcpus: int = 1, **params: Any) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "memory": memory,
            "vcpus": vcpus, "disks": [{"size": 10}], **params}  # fmt: skip


def where(ctx: FakeContext, instance: str) -> str:
    return str(ctx.get_object("node", ctx.get_object("instance", instance)["primary_node"])["name"])


def test_create_goes_to_the_node_with_the_most_free_memory() -> None:
    c = small_cluster()
    assert run(create("a", 2048), c)["primary_node"] == "node3"  # 4096 > 2048 > 1024 free
    assert run(create("b", 512), c)["primary_node"] == "node2"  # 2048 = 2048: by name
    assert run(create("c", 512), c)["primary_node"] == "node3"  # 2048 > 1536
    assert where(c, "b") == "node2"


def test_create_without_room_says_what_is_short_and_changes_nothing() -> None:
    c = small_cluster()
    with pytest.raises(OpPrereqError) as exc:
        acquire(REGISTRY.build(create("web3", 8192, 2)), c)
    assert str(exc.value) == (
        "no node has room for web3: it needs 8192 MiB and 2 CPUs; most free: node3 with 4096 MiB"
    )
    assert exc.value.ecode == ECODE_NORES and c.writes == []
    c.node("node4", mtotal=8192)
    assert run(create("web3", 8192, 2), c)["primary_node"] == "node4"


def test_a_named_node_without_memory_or_cpu_fails() -> None:
    c = small_cluster()
    with pytest.raises(
        OpPrereqError,
        match=r"^node node1 has no room for big: it needs "
        r"2048 MiB and 1 CPU; it has 1024 MiB and 2 CPUs free$",
    ):
        run(create("big", 2048, pnode="node1"), c)
    with pytest.raises(
        OpPrereqError, match="node node1 has no room for busy: it needs 512 MiB and 3 CPUs"
    ):
        run(create("busy", 512, 3, pnode="node1"), c)  # 2 of 4 virtual CPUs in use
    assert run(create("ok", 1024, 2, pnode="node1"), c)["primary_node"] == "node1"
    assert c.writes == [("add_object", "instance", "ok")]


def test_stopped_instances_use_no_room() -> None:
    c = small_cluster()
    run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web2"}, c)
    assert c.get_object("instance", "web2")["admin_state"] == "down"
    assert run(create("huge", 8192, pnode="node2"), c)["primary_node"] == "node2"
    with pytest.raises(OpPrereqError, match="node node2 has no room for web2: it needs 6144"):
        run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web2"}, c)
    assert c.get_object("instance", "web2")["admin_state"] == "down"
    run({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "huge"}, c)
    assert run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web2"}, c) is None
    assert c.get_object("instance", "web2")["admin_state"] == "up"
    assert "Instance 'web2' started on node 'node2'" in c.messages()


def test_startup_and_shutdown_are_idempotent_and_refuse_offline() -> None:
    c = small_cluster()
    run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1"}, c)
    run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1"}, c)
    run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web1"}, c)
    assert c.messages()[0] == "Instance 'web1' is already running"
    assert c.messages()[-1] == "Instance 'web1' is already stopped"
    c.instance("gone", "node3", admin_state="offline")
    for op_id in ("OP_INSTANCE_STARTUP", "OP_INSTANCE_SHUTDOWN"):
        with pytest.raises(OpPrereqError, match="instance 'gone' is offline"):
            run({"OP_ID": op_id, "instance_name": "gone"}, c)
    c.objects["node"][c.get_object("node", "node1")["uuid"]]["offline"] = True
    with pytest.raises(OpPrereqError, match="node 'node1' is offline; cannot start"):
        run({"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "web1"}, c)


@pytest.mark.parametrize("op_id", ["OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER"])
def test_moves_choose_by_room_and_refuse_a_full_target(op_id: str) -> None:
    c = small_cluster()
    with pytest.raises(OpPrereqError) as exc:
        run({"OP_ID": op_id, "instance_name": "web2"}, c)  # 6144 MiB: nowhere
    assert str(exc.value) == ("no node has room for web2: it needs 6144 MiB and 1 CPU; "
                              "most free: node3 with 4096 MiB")  # fmt: skip
    with pytest.raises(OpPrereqError, match="node node1 has no room for web2"):
        run({"OP_ID": op_id, "instance_name": "web2", "target_node": "node1"}, c)
    assert c.writes == [] and where(c, "web2") == "node2"
    assert c.writes == [] and where(c, "web1") == "node1"
    result = run({"OP_ID": op_id, "instance_name": "web1", "duration": 0.5}, c)
    assert result == {"instance": "web1", "source": "node1", "target": "node3"}
    assert c.sleeps == [0.5]


def test_failover_logs_stop_and_start_and_a_cancel_changes_nothing() -> None:
    c = small_cluster(EventSleepContext())
    c.cancel()
    op = {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "web1", "duration": 30}
    with pytest.raises(BaseException) as exc:
        run(op, c)
    assert type(exc.value).__name__ == "Canceled"
    assert where(c, "web1") == "node1" and c.writes == []
    c2 = small_cluster()
    run({**op, "duration": 0}, c2)
    assert c2.messages() == ["Shutting down instance 'web1' on node 'node1'",
                             "Starting instance 'web1' on node 'node3'"]  # fmt: skip


def test_a_stopped_instance_moves_anywhere_eligible() -> None:
    c = small_cluster()
    run({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "web2"}, c)
    result = run({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web2",
                  "target_node": "node1"}, c)  # fmt: skip
    assert result["target"] == "node1"  # 1024 MiB free, but a stopped instance needs none
    with pytest.raises(OpPrereqError, match="node 'node3' is drained"):
        c.objects["node"][c.get_object("node", "node3")["uuid"]]["drained"] = True
        run({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "web1", "target_node": "node3"}, c)


def test_node_capacity_is_set_and_cannot_shrink_below_the_running_use() -> None:
    c = FakeContext()
    added = run({"OP_ID": "OP_NODE_ADD", "node_name": "big", "mtotal": 131072, "ctotal": 64}, c)
    node = c.get_object("node", added["uuid"])
    assert (node["mtotal"], node["ctotal"]) == (131072, 64)
    run({"OP_ID": "OP_NODE_ADD", "node_name": "plain"}, c)
    assert (c.get_object("node", "plain")["mtotal"], c.get_object("node", "plain")["ctotal"]) == (
        65536,
        32,
    )
    c.instance("vm", "big", memory=4096)
    changes = run({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "big", "mtotal": 8192}, c)
    assert changes == [["mtotal", 8192]]
    with pytest.raises(OpExecError, match="runs instances using 4096 MiB and 1 CPUs; 2048 MiB"):
        run({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "big", "mtotal": 2048}, c)
    with pytest.raises(OpExecError, match="too small"):
        run({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "big", "ctotal": 0}, c)
    assert c.get_object("node", "big")["mtotal"] == 8192


def test_the_policy_vcpu_ratio_bounds_cpus_and_cannot_strand_running_instances() -> None:
    c = small_cluster()  # node1: 1 CPU, web1 runs 2 virtual CPUs
    set_ratio = {"OP_ID": "OP_CLUSTER_SET_PARAMS", "vcpu_ratio": 1.5}
    with pytest.raises(OpPrereqError, match=r"vcpu_ratio 1\.5 is too small: node 'node1' runs 2"):
        run(set_ratio, c)
    assert c.writes == []
    assert run({**set_ratio, "vcpu_ratio": 2.0}, c) == [["vcpu_ratio", 2.0]]
    assert c.cluster["ipolicy"]["vcpu-ratio"] == 2.0
    with pytest.raises(
        OpPrereqError,
        match="node node1 has no room for more: it needs 128 MiB"
        " and 1 CPU; it has 1024 MiB and 0 CPUs free",
    ):
        run(create("more", 128, pnode="node1"), c)
    assert run({**set_ratio, "vcpu_ratio": 2.0}, c) == []


def test_cluster_verify_reports_nodes_over_capacity() -> None:
    c = small_cluster()
    assert run({"OP_ID": "OP_CLUSTER_VERIFY"}, c)["ok"] is True
    c.objects["node"][c.get_object("node", "node1")["uuid"]]["mtotal"] = 1024  # behind our back
    assert run({"OP_ID": "OP_CLUSTER_VERIFY"}, c)["problems"] == [
        "node 'node1' is over capacity: its running instances use 3072 of 1024 MiB and "
        "2 of 4 virtual CPUs"
    ]
