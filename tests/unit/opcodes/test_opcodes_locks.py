"""Lock plans: the LockPlan/LockPhase types and each opcode's plan against the table in
docs/contracts.md#job-processes-and-opcodes."""

from __future__ import annotations

from typing import Any

import pytest

from jobproc.opcodes import BGL, LockPhase, LockPlan, OpExecError, lock, lock_sort_key, lockset
from jobproc.opcodes.registry import REGISTRY

from .fakes import FakeContext, FakeLocks, acquire, held_after, resolve_all

S, X = "shared", "exclusive"


def phases(op: dict[str, Any], ctx: FakeContext) -> list[tuple[dict[str, str], list[str]]]:
    """The opcode's phases as ({lock: mode}, [released]) after acquiring them for real."""
    got = acquire(REGISTRY.build(op), ctx)
    return [(ph.locks(), list(ph.release)) for ph in got]


# (opcode, expected phases) on the conftest cluster:
# n1 (i1, i2: 2048 MiB; secondary of i3), n2 (i3: 512 MiB), n3 drained, n4 offline.
TABLE: list[tuple[dict[str, Any], list[tuple[dict[str, str], list[str]]]]] = [
    ({"OP_ID": "OP_TEST_DELAY", "duration": 0}, [({BGL: S}, [])]),
    (
        {"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_nodes": ["b", "a", "b", "ghost"]},
        [({BGL: S, "node/a": X, "node/b": X, "node/ghost": X}, [])],
    ),
    ({"OP_ID": "OP_CLUSTER_RENAME", "name": "c2"}, [({BGL: X}, [])]),
    ({"OP_ID": "OP_CLUSTER_SET_PARAMS", "max_running_jobs": 3}, [({BGL: X}, [])]),
    (
        {"OP_ID": "OP_NODE_ADD", "node_name": "n9"},
        [({BGL: S, "nodegroup/default": S, "node/n9": X}, [])],
    ),
    (
        {"OP_ID": "OP_NODE_ADD", "node_name": "n9", "group": "other"},
        [({BGL: S, "nodegroup/other": S, "node/n9": X}, [])],
    ),
    ({"OP_ID": "OP_NODE_REMOVE", "node_name": "n1"}, [({BGL: S, "node/n1": X}, [])]),
    (
        {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n2", "drained": True},
        [({BGL: S, "node/n2": X}, [])],
    ),
    (
        {
            "OP_ID": "OP_INSTANCE_CREATE",
            "instance_name": "i9",
            "memory": 1,
            "vcpus": 1,
            "disks": [],
            "pnode": "n1",
        },
        [({BGL: S, "instance/i9": X, "node/n1": X, "node-res/n1": X}, [])],
    ),
    (
        {
            "OP_ID": "OP_INSTANCE_CREATE",
            "instance_name": "i9",
            "memory": 1,
            "vcpus": 1,
            "disks": [],
        },
        [
            ({BGL: S, "instance/i9": X, "node/[lockset]": S}, []),
            ({"node/n2": X, "node-res/n2": X}, ["node/[lockset]"]),
        ],
    ),
    (
        {"OP_ID": "OP_INSTANCE_REMOVE", "instance_name": "i3"},
        [({BGL: S, "instance/i3": X}, []), ({"node/n1": X, "node/n2": X}, [])],
    ),
    (
        {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i1"},
        [({BGL: S, "instance/i1": X}, []), ({"node/n1": S, "node/n2": S, "node-res/n2": X}, [])],
    ),
    (
        {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i3"},
        [({BGL: S, "instance/i3": X}, []), ({"node/n1": S, "node/n2": S, "node-res/n1": X}, [])],
    ),
    (
        {"OP_ID": "OP_INSTANCE_MIGRATE", "instance_name": "i1", "target_node": "n3"},
        [({BGL: S, "instance/i1": X}, []), ({"node/n1": S, "node/n3": S, "node-res/n3": X}, [])],
    ),
    (
        {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "i1"},
        [({BGL: S, "instance/i1": X}, []), ({"node/n1": S, "node/n2": S, "node-res/n2": X}, [])],
    ),
    (
        {"OP_ID": "OP_INSTANCE_FAILOVER", "instance_name": "i3", "target_node": "n4"},
        [({BGL: S, "instance/i3": X}, []), ({"node/n2": S, "node/n4": S, "node-res/n4": X}, [])],
    ),
    (
        {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": "i3"},
        [({BGL: S, "instance/i3": X}, []), ({"node/n2": S, "node-res/n2": X}, [])],
    ),
    (
        {"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": "i3"},
        [({BGL: S, "instance/i3": X}, []), ({"node/n2": S}, [])],
    ),
    (
        {"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": "i3", "mode": "replace_auto"},
        [
            ({BGL: S, "instance/i3": X}, []),
            ({"node/n1": X, "node/n2": X, "node-res/n1": X, "node-res/n2": X}, []),
        ],
    ),
    ({"OP_ID": "OP_NODE_EVACUATE", "node_name": "n1"}, [({BGL: S, "node/n1": S}, [])]),
    (
        {"OP_ID": "OP_CLUSTER_VERIFY"},
        [
            (
                {
                    BGL: S,
                    "instance/[lockset]": S,
                    "nodegroup/[lockset]": S,
                    "node/[lockset]": S,
                    "node-res/[lockset]": S,
                    "network/[lockset]": S,
                },
                [],
            )
        ],
    ),
]


@pytest.mark.parametrize(
    ("op", "expected"), TABLE, ids=[f"{op['OP_ID']}-{i}" for i, (op, _) in enumerate(TABLE)]
)
def test_lock_plan_matches_the_table(
    op: dict[str, Any], expected: list[tuple[dict[str, str], list[str]]], ctx: FakeContext
) -> None:
    assert phases(op, ctx) == expected


@pytest.mark.parametrize(
    ("op", "expected"), TABLE, ids=[f"{op['OP_ID']}-{i}" for i, (op, _) in enumerate(TABLE)]
)
def test_phases_are_in_lock_order_and_bgl_first(
    op: dict[str, Any], expected: Any, ctx: FakeContext
) -> None:
    got = acquire(REGISTRY.build(op), ctx)
    assert got[0].acquire[0][0] == BGL
    for ph in got:
        names = [name for name, _ in ph.acquire]
        assert names == sorted(names, key=lock_sort_key)
        assert all(BGL not in dict(p.acquire) for p in got[1:])


def test_instance_create_final_locks(ctx: FakeContext) -> None:
    op = REGISTRY.build(
        {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i9", "memory": 1, "vcpus": 1, "disks": []}
    )
    acquire(op, ctx)
    assert ctx.locks.held == {BGL: S, "instance/i9": X, "node/n2": X, "node-res/n2": X}


def test_node_add_locks_a_group_given_by_uuid_under_its_name(ctx: FakeContext) -> None:
    group = ctx.get_object("nodegroup", "default")
    got = phases({"OP_ID": "OP_NODE_ADD", "node_name": "n9", "group": group["uuid"]}, ctx)
    assert "nodegroup/default" in got[0][0]


def test_instance_phase_fails_for_a_missing_instance(ctx: FakeContext) -> None:
    for op_id in (
        "OP_INSTANCE_REMOVE",
        "OP_INSTANCE_MIGRATE",
        "OP_INSTANCE_FAILOVER",
        "OP_INSTANCE_STARTUP",
        "OP_INSTANCE_SHUTDOWN",
    ):
        op = REGISTRY.build({"OP_ID": op_id, "instance_name": "nope"})
        plan = op.locks(op.params, ctx)
        assert plan.phase(0, ctx).locks() == {BGL: S, "instance/nope": X}
        with pytest.raises(OpExecError, match="instance 'nope' not found"):
            plan.phase(1, ctx)


def test_create_without_eligible_node_fails_while_choosing() -> None:
    c = FakeContext()
    c.node("n1", drained=True)
    c.node("n2", vm_capable=False)
    op = REGISTRY.build(
        {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i", "memory": 1, "vcpus": 1, "disks": []}
    )
    with pytest.raises(OpExecError, match="no online, non-drained, vm_capable node"):
        acquire(op, c)


# -- the types ---------------------------------------------------------------------------


def test_lock_names() -> None:
    assert lock("node", "n1") == "node/n1"
    assert lockset("node-res") == "node-res/[lockset]"
    for level, name in (("nodes", "n1"), ("node", ""), ("node", "a/b")):
        with pytest.raises(ValueError):
            lock(level, name)
    names = [
        "node/b",
        "cluster/BGL",
        "node/[lockset]",
        "instance/z",
        "node/a",
        "network/x",
        "node-res/a",
        "nodegroup/g",
        "instance/[lockset]",
    ]
    assert sorted(names, key=lock_sort_key) == [
        "cluster/BGL",
        "instance/[lockset]",
        "instance/z",
        "nodegroup/g",
        "node/[lockset]",
        "node/a",
        "node/b",
        "node-res/a",
        "network/x",
    ]


def test_lock_phase_merges_sorts_and_checks() -> None:
    ph = LockPhase.of(
        [("node/b", S), ("node/a", S), ("node/b", X), ("instance/i", S)], release=["node/[lockset]"]
    )
    assert ph.acquire == (("instance/i", S), ("node/a", S), ("node/b", X))
    assert ph.acquire_request() == [["instance/i", S], ["node/a", S], ["node/b", X]]
    assert ph.release_request() == [["node/[lockset]", "release"]]
    with pytest.raises(ValueError, match="both released and acquired"):
        LockPhase.of([("node/a", S)], release=["node/a"])
    with pytest.raises(ValueError, match="mode"):
        LockPhase.of([("node/a", "release")])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="unknown lock level 'bogus'"):
        LockPhase.of([("bogus/a", S)])


def test_lock_plan_owns_the_bgl(ctx: FakeContext) -> None:
    with pytest.raises(ValueError, match="BGL"):
        LockPlan(phases=(LockPhase.of([(BGL, X)]),))
    with pytest.raises(ValueError, match="BGL"):
        LockPlan(bgl="release")  # type: ignore[arg-type]
    sneaky = LockPlan(phases=(LockPhase(), lambda cfg: LockPhase.of([(BGL, X)])))
    with pytest.raises(ValueError, match="BGL"):
        sneaky.phase(1, ctx)
    empty = LockPlan(bgl=X)
    assert len(empty) == 1
    assert empty.phase(0, ctx).acquire == ((BGL, X),)
    with pytest.raises(IndexError):
        empty.phase(1, ctx)


def test_resolve_all_and_held_after(ctx: FakeContext) -> None:
    op = REGISTRY.build(
        {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i9", "memory": 1, "vcpus": 1, "disks": []}
    )
    resolved = resolve_all(op.locks(op.params, ctx), ctx)
    assert held_after(resolved) == {BGL: S, "instance/i9": X, "node/n2": X, "node-res/n2": X}


def test_fake_locks_enforce_the_order_rules() -> None:
    """The fake refuses what wconfd refuses, so the plan tests above mean something."""
    locks = FakeLocks()
    locks.apply([["node/[lockset]", S], ["instance/i", X]])
    with pytest.raises(Exception, match="holding"):  # member ex under a shared lockset
        locks.apply([["node/[lockset]", "release"], ["node/n1", X]])
    with pytest.raises(Exception, match="holding"):  # instance < node: order violation
        locks.apply([["instance/j", X]])
    locks.apply([["node/[lockset]", "release"]])
    locks.apply([["node/n1", X]])
    assert locks.held == {"instance/i": X, "node/n1": X}
