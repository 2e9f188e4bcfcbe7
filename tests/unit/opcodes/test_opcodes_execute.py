"""Execution of every built-in opcode against the in-memory fake context."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from client.errors import LockNotHeld
from jobproc.opcodes import Canceled, OpContext, OpExecError
from jobproc.opcodes.errors import ECODE_EXISTS, ECODE_NOENT, ECODE_STATE
from jobproc.opcodes.registry import REGISTRY

from .fakes import EventSleepContext, FakeContext, acquire, run


def primary_of(ctx: FakeContext, instance: str) -> str:
    inst = ctx.get_object("instance", instance)
    return ctx.get_object("node", inst["primary_node"])["name"]


def test_fakes_satisfy_the_protocol(ctx: FakeContext) -> None:
    assert isinstance(ctx, OpContext)


# -- OP_TEST_DELAY -----------------------------------------------------------------------


def test_delay_sleeps_once_by_default(ctx: FakeContext) -> None:
    assert run({"OP_ID": "OP_TEST_DELAY", "duration": 1.5, "on_nodes": ["x"]}, ctx) is None
    assert ctx.sleeps == [1.5]
    assert ctx.logs == []
    assert ctx.writes == []


@pytest.mark.parametrize(("repeat", "sleeps"), [(0, 1), (1, 1), (3, 3)])
def test_delay_repeat_as_ganeti(ctx: FakeContext, repeat: int, sleeps: int) -> None:
    run({"OP_ID": "OP_TEST_DELAY", "duration": 0.25, "repeat": repeat}, ctx)
    assert ctx.sleeps == [0.25] * sleeps
    expected = [f"Test delay iteration {i}/{repeat - 1}" for i in range(repeat)]
    assert ctx.messages() == expected


def test_delay_logs_messages_then_fails(ctx: FakeContext) -> None:
    with pytest.raises(OpExecError, match=r"^Opcode failure was requested$"):
        run(
            {
                "OP_ID": "OP_TEST_DELAY",
                "duration": 2,
                "fail": True,
                "log_messages": ["first", "second"],
            },
            ctx,
        )
    assert ctx.logs == [("message", "first"), ("message", "second")]
    assert ctx.sleeps == [2]  # the delay happens before the failure


def test_delay_cancel_during_sleep_stops_it(ctx: FakeContext) -> None:
    ctx.cancel_at_sleep = 2
    with pytest.raises(Canceled):
        run({"OP_ID": "OP_TEST_DELAY", "duration": 5, "repeat": 4, "fail": True}, ctx)
    assert len(ctx.sleeps) == 2
    assert not issubclass(Canceled, Exception)  # `except Exception` cannot swallow it
    assert REGISTRY.lookup("OP_TEST_DELAY").INTERRUPTIBLE


def test_delay_cancel_wakes_a_real_wait() -> None:
    ctx = EventSleepContext()
    op = REGISTRY.build({"OP_ID": "OP_TEST_DELAY", "duration": 30})
    acquire(op, ctx)
    outcome: list[BaseException | None] = []

    def target() -> None:
        try:
            op.execute(ctx)
            outcome.append(None)
        except BaseException as exc:
            outcome.append(exc)

    start = time.monotonic()
    thread = threading.Thread(target=target)
    thread.start()
    time.sleep(0.05)
    ctx.cancel()
    thread.join(5)
    assert not thread.is_alive()
    assert isinstance(outcome[0], Canceled)
    assert time.monotonic() - start < 5


# -- cluster -----------------------------------------------------------------------------


def test_cluster_rename(ctx: FakeContext) -> None:
    assert run({"OP_ID": "OP_CLUSTER_RENAME", "name": "prod"}, ctx) == "prod"
    cluster = ctx.get_object("cluster", "")
    assert cluster["name"] == "prod" and cluster["serial_no"] == 2
    with pytest.raises(OpExecError, match="already named 'prod'"):
        run({"OP_ID": "OP_CLUSTER_RENAME", "name": "prod"}, ctx)


def test_cluster_set_params(ctx: FakeContext) -> None:
    result = run(
        {
            "OP_ID": "OP_CLUSTER_SET_PARAMS",
            "max_running_jobs": 5,
            "mac_prefix": "AB:CD:EF",
            "lock_enforcement": "enforce",
            "tags": ["a", "b", "a"],
        },
        ctx,
    )
    assert result == [["max_running_jobs", 5], ["mac_prefix", "ab:cd:ef"], ["tags", ["a", "b"]]]
    cluster = ctx.get_object("cluster", "")
    assert (cluster["max_running_jobs"], cluster["mac_prefix"], cluster["tags"]) == (
        5,
        "ab:cd:ef",
        ["a", "b"],
    )
    writes = len(ctx.writes)
    assert run({"OP_ID": "OP_CLUSTER_SET_PARAMS", "max_running_jobs": 5}, ctx) == []
    assert run({"OP_ID": "OP_CLUSTER_SET_PARAMS"}, ctx) == []
    assert len(ctx.writes) == writes  # nothing changed, nothing written


def test_cluster_verify_clean_and_broken(ctx: FakeContext) -> None:
    assert run({"OP_ID": "OP_CLUSTER_VERIFY"}, ctx) == {"ok": True, "problems": []}
    ctx.instance("bad", "n4", nics=[{"mac": "aa:00:00:00:00:01"}])
    ctx.instance("dup", "n2", nics=[{"mac": "AA:00:00:00:00:01"}], secondaries=("n2",))
    ctx.node("stray", group="no-such-group")
    result = run({"OP_ID": "OP_CLUSTER_VERIFY"}, ctx)
    assert result["ok"] is False
    assert result["problems"] == [
        "node 'stray': unknown node group 'no-such-group'",
        "instance 'bad': primary node 'n4' is offline",
        "instance 'dup': secondary node is the primary node",
        "MAC aa:00:00:00:00:01 is used by 2 NICs",
    ]
    assert "ERROR: MAC aa:00:00:00:00:01 is used by 2 NICs" in ctx.messages()
    assert ctx.writes == []


# -- nodes -------------------------------------------------------------------------------


def test_node_add(ctx: FakeContext) -> None:
    result = run({"OP_ID": "OP_NODE_ADD", "node_name": "n9", "primary_ip": "2001:DB8::9"}, ctx)
    node = ctx.get_object("node", "n9")
    assert result == {"name": "n9", "uuid": node["uuid"]}
    assert node["group"] == ctx.get_object("nodegroup", "default")["uuid"]
    assert node["primary_ip"] == "2001:db8::9"
    assert (node["offline"], node["drained"], node["vm_capable"]) == (False, False, True)
    assert ("primary_ip", "2001:db8::9") in ctx.reservations


@pytest.mark.parametrize(
    ("params", "message", "ecode"),
    [
        ({"node_name": "n1"}, "node 'n1' already exists", ECODE_EXISTS),
        ({"node_name": "n9", "group": "other"}, "nodegroup 'other' not found", ECODE_NOENT),
        (
            {"node_name": "n9", "primary_ip": "192.0.2.1"},
            "primary IP 192.0.2.1 is already used by node 'n1'",
            ECODE_EXISTS,
        ),
        (
            {"node_name": "n9", "primary_ip": "192.0.2.77"},
            "primary IP 192.0.2.77 is reserved by another job",
            ECODE_EXISTS,
        ),
    ],
)
def test_node_add_errors(
    ctx: FakeContext, params: dict[str, Any], message: str, ecode: str
) -> None:
    ctx.reservations[("primary_ip", "192.0.2.77")] = "job-7"
    with pytest.raises(OpExecError) as exc:
        run({"OP_ID": "OP_NODE_ADD", **params}, ctx)
    assert str(exc.value) == message and exc.value.ecode == ecode
    assert ctx.writes == []


def test_node_remove(ctx: FakeContext) -> None:
    assert run({"OP_ID": "OP_NODE_REMOVE", "node_name": "n4"}, ctx) is None
    assert [n["name"] for n in ctx.list_objects("node")] == ["n1", "n2", "n3"]
    with pytest.raises(OpExecError, match="node 'n1' still has instances: i1, i2, i3") as exc:
        run({"OP_ID": "OP_NODE_REMOVE", "node_name": "n1"}, ctx)
    assert exc.value.ecode == ECODE_STATE
    with pytest.raises(OpExecError, match="node 'n2' still has instances: i3"):
        run({"OP_ID": "OP_NODE_REMOVE", "node_name": "n2"}, ctx)
    with pytest.raises(OpExecError, match="node 'n4' not found"):
        run({"OP_ID": "OP_NODE_REMOVE", "node_name": "n4"}, ctx)


@pytest.mark.parametrize(
    ("node", "params", "diff", "flags"),
    [
        ("n2", {"drained": True}, [["drained", True]], (False, True, False)),
        ("n1", {"offline": True}, [["offline", True]], (True, False, False)),
        (
            "n3",
            {"master_candidate": True},
            [["drained", False], ["master_candidate", True]],
            (False, False, True),
        ),
        ("n4", {"offline": False}, [["offline", False]], (False, False, False)),
        ("n3", {"drained": True}, [], (False, True, False)),
        ("n2", {"offline": False, "drained": False}, [], (False, False, False)),
    ],
)
def test_node_set_params(
    ctx: FakeContext,
    node: str,
    params: dict[str, Any],
    diff: list[list[Any]],
    flags: tuple[bool, bool, bool],
) -> None:
    if node == "n1":
        ctx.objects["node"][ctx.get_object("node", "n1")["uuid"]]["master_candidate"] = True
        diff = [["offline", True], ["master_candidate", False]]
    assert run({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node, **params}, ctx) == diff
    got = ctx.get_object("node", node)
    assert (got["offline"], got["drained"], got["master_candidate"]) == flags
    assert len(ctx.writes) == (1 if diff else 0)


def test_node_set_params_missing_node(ctx: FakeContext) -> None:
    with pytest.raises(OpExecError, match="node 'zz' not found"):
        run({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "zz", "drained": True}, ctx)


def test_node_evacuate_submits_one_migration_per_primary_instance(ctx: FakeContext) -> None:
    ctx._priority = -3
    reason = [["user:cli", "hardware swap", 123], ["rate-limit:2:drain-n1", "", 124]]
    ids = run({"OP_ID": "OP_NODE_EVACUATE", "node_name": "n1", "reason": reason}, ctx)
    assert ids == [100, 101]
    assert ctx.submitted == [
        [
            {
                "OP_ID": "OP_INSTANCE_MIGRATE",
                "instance_name": name,
                "priority": -3,
                "reason": reason,
                "comment": "Submitted by OP_NODE_EVACUATE (job 42)",
            }
        ]
        for name in ("i1", "i2")  # i3 has n1 only as secondary: it stays
    ]
    assert ctx.writes == []
    # The submitted jobs do evacuate the node.
    for job in ctx.submitted:
        run(job[0], ctx)
    assert {primary_of(ctx, "i1"), primary_of(ctx, "i2")} == {"n2"}


def test_node_evacuate_empty_and_missing(ctx: FakeContext) -> None:
    assert run({"OP_ID": "OP_NODE_EVACUATE", "node_name": "n4"}, ctx) == []
    assert ctx.submitted == []
    assert ctx.messages() == ["Node 'n4' has no primary instances"]
    with pytest.raises(OpExecError, match="node 'zz' not found"):
        run({"OP_ID": "OP_NODE_EVACUATE", "node_name": "zz"}, ctx)


# -- instances ---------------------------------------------------------------------------

CREATE = {
    "OP_ID": "OP_INSTANCE_CREATE",
    "instance_name": "i9",
    "memory": 256,
    "vcpus": 2,
    "disks": [{"size": 1024}, {"size": 8, "mode": "ro"}],
}


def test_instance_create_on_the_least_loaded_eligible_node(ctx: FakeContext) -> None:
    result = run(CREATE, ctx)  # n1 2048 MiB, n2 512 MiB, n3 drained, n4 offline
    inst = ctx.get_object("instance", "i9")
    assert result == {
        "name": "i9",
        "uuid": inst["uuid"],
        "primary_node": "n2",
        "macs": [inst["nics"][0]["mac"]],
    }
    assert primary_of(ctx, "i9") == "n2"
    assert [(d["size"], d["mode"]) for d in inst["disks"]] == [(1024, "rw"), (8, "ro")]
    assert len({d["uuid"] for d in inst["disks"]}) == 2
    assert (inst["memory"], inst["vcpus"], inst["admin_state"]) == (256, 2, "up")
    assert inst["nics"][0]["mac"].startswith("aa:00:00:")
    assert ("mac", inst["nics"][0]["mac"]) in ctx.reservations


def test_instance_create_placement_rule() -> None:
    c = FakeContext()
    for name in ("c", "b", "a", "d"):
        c.node(name)
    c.instance("x1", "a", memory=100)
    c.instance("x2", "b", memory=50)
    c.instance("x3", "b", memory=50)
    c.instance("x4", "c", memory=100)
    # d is empty but drained; b and a... a has 100 MiB in 1 instance, b 100 MiB in 2,
    # c 100 MiB in 1: a and c tie, a wins by name.
    c.objects["node"][c.get_object("node", "d")["uuid"]]["drained"] = True
    assert run({**CREATE, "instance_name": "new"}, c)["primary_node"] == "a"


def test_instance_create_with_pnode_and_nics(ctx: FakeContext) -> None:
    result = run({**CREATE, "pnode": "n1", "nics": 3}, ctx)
    assert result["primary_node"] == "n1" and len(set(result["macs"])) == 3
    result = run({**CREATE, "instance_name": "i10", "nics": 0}, ctx)
    assert result["macs"] == [] and ctx.get_object("instance", "i10")["nics"] == []


@pytest.mark.parametrize(
    ("params", "message"),
    [
        ({"instance_name": "i1"}, "instance 'i1' already exists"),
        ({"pnode": "n3"}, "node 'n3' is drained; cannot create instance 'i9' on it"),
        ({"pnode": "n4"}, "node 'n4' is offline; cannot create instance 'i9' on it"),
        ({"pnode": "zz"}, "node 'zz' not found"),
    ],
)
def test_instance_create_errors(ctx: FakeContext, params: dict[str, Any], message: str) -> None:
    with pytest.raises(OpExecError) as exc:
        run({**CREATE, **params}, ctx)
    assert str(exc.value) == message
    assert ctx.writes == []


def test_instance_remove(ctx: FakeContext) -> None:
    assert run({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "i3"}, ctx) is None
    assert sorted(i["name"] for i in ctx.list_objects("instance")) == ["i1", "i2"]
    with pytest.raises(OpExecError, match="instance 'i3' not found"):
        run({"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "i3"}, ctx)


def test_instance_migrate(ctx: FakeContext) -> None:
    result = run({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i1"}, ctx)
    assert result == {"instance": "i1", "source": "n1", "target": "n2"}
    assert primary_of(ctx, "i1") == "n2"
    # To its secondary by default: the roles swap.
    result = run({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i3"}, ctx)
    assert result == {"instance": "i3", "source": "n2", "target": "n1"}
    i3 = ctx.get_object("instance", "i3")
    assert primary_of(ctx, "i3") == "n1"
    assert i3["secondary_nodes"] == [ctx.get_object("node", "n2")["uuid"]]
    assert "Migrating instance 'i3' from 'n2' to 'n1'" in ctx.messages()


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("n1", "instance 'i1' is already on node 'n1'"),
        ("n3", "node 'n3' is drained; cannot migrate instance 'i1' to it"),
        ("n4", "node 'n4' is offline; cannot migrate instance 'i1' to it"),
        ("zz", "node 'zz' not found"),
    ],
)
def test_instance_migrate_errors(ctx: FakeContext, target: str, message: str) -> None:
    with pytest.raises(OpExecError) as exc:
        run({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i1", "target_node": target}, ctx)
    assert str(exc.value) == message
    assert ctx.writes == []


def test_instance_migrate_without_any_target() -> None:
    c = FakeContext()
    c.node("only")
    c.instance("lonely", "only")
    with pytest.raises(OpExecError, match="no online, non-drained, vm_capable node"):
        run({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "lonely"}, c)


def test_instance_replace_disks(ctx: FakeContext) -> None:
    op = {"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": "i3", "duration": 2}
    assert run({**op, "mode": "replace_on_secondary"}, ctx) is None
    assert ctx.sleeps == [2]
    assert ctx.messages() == [
        "Replacing disks of instance 'i3' on node 'n1'",
        "Disks of instance 'i3' replaced",
    ]
    ctx.logs.clear()
    run({**op, "mode": "replace_auto"}, ctx)
    assert ctx.messages()[:2] == [
        "Replacing disks of instance 'i3' on node 'n2'",
        "Replacing disks of instance 'i3' on node 'n1'",
    ]
    assert ctx.writes == []
    assert not REGISTRY.lookup("OP_INSTANCE_REPLACE_DISKS").INTERRUPTIBLE


def test_instance_replace_disks_errors(ctx: FakeContext) -> None:
    with pytest.raises(OpExecError, match="instance 'i1' has no secondary node"):
        run(
            {
                "OP_ID": "OP_INSTANCE_REPLACE_DISKS",
                "instance_name": "i1",
                "mode": "replace_on_secondary",
            },
            ctx,
        )
    ctx.instance("down", "n4")
    with pytest.raises(OpExecError, match="node 'n4' is offline"):
        run(
            {
                "OP_ID": "OP_INSTANCE_REPLACE_DISKS",
                "instance_name": "down",
                "mode": "replace_on_primary",
            },
            ctx,
        )


# -- the fake's lock enforcement is real -------------------------------------------------


def test_writes_without_the_plan_are_refused(ctx: FakeContext) -> None:
    op = REGISTRY.build({"OP_ID": "OP_NODE_ADD", "node_name": "n9"})
    with pytest.raises(LockNotHeld):
        op.execute(ctx)
    with pytest.raises(RuntimeError, match="locks"):
        REGISTRY.build({"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i1"}).execute(ctx)
