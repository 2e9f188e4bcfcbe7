"""luxid's real placement for drains (`luxid.drains.view.place`, client.capacity's placement
rule on a ClusterView) agrees with the reference rule of the core's tests, and
`node.submit_refused` blocks a refused move until the room changes."""

from __future__ import annotations

import pytest
from drains_testlib import World, cluster
from drains_testlib import place as reference
from hypothesis import given
from hypothesis import strategies as st

from luxid.drains import NoRoom, Submit, moves, node
from luxid.drains.view import InstanceFacts, NodeFacts, place

NODES = ["n1", "n2", "n3", "n4"]


@st.composite
def views(draw):  # type: ignore[no-untyped-def]
    nodes = {
        name: NodeFacts(
            name=name,
            offline=draw(st.booleans()),
            drained=draw(st.booleans()),
            mtotal=draw(st.sampled_from([1024, 2048, 4096])),
            ctotal=draw(st.integers(1, 2)),
        )
        for name in NODES
    }
    count = draw(st.integers(1, 8))
    instances = {
        f"i{k}": InstanceFacts(
            name=f"i{k}",
            primary_node=draw(st.sampled_from(NODES)),
            admin_state=draw(st.sampled_from(["up", "down"])),
            memory=draw(st.sampled_from([256, 512, 1024, 2048])),
            vcpus=draw(st.integers(1, 4)),
        )
        for k in range(count)
    }
    view = cluster({}, {})
    return type(view)(nodes=nodes, instances=instances, vcpu_ratio=1.0)


def _outcome(fn, view, instance, exclude):  # type: ignore[no-untyped-def]
    try:
        return fn(view, instance, exclude)
    except NoRoom:
        return None


@given(views(), st.frozensets(st.sampled_from(NODES), max_size=2))
def test_place_agrees_with_the_reference_rule(view, exclude) -> None:  # type: ignore[no-untyped-def]
    for instance in view.instances:
        chosen = _outcome(place, view, instance, exclude)
        assert chosen == _outcome(reference, view, instance, exclude)
        if chosen is not None:
            assert chosen not in exclude and chosen != view.instances[instance].primary_node


def test_no_room_says_what_is_short() -> None:
    view = cluster({"n1": 8192, "n2": 2048}, {"web3": ("n1", 4096)})
    with pytest.raises(NoRoom, match=r"^no node has room for web3: it needs 4096 MiB and 1 CPU; "
                       r"most free: n2 with 2048 MiB$"):  # fmt: skip
        place(view, "web3", frozenset())


def test_a_refused_migration_is_blocked_until_the_room_changes() -> None:
    world = World(cluster({"n1": 8192, "n2": 8192}, {"web3": ("n1", 1024)}))
    world.drain("n1")
    world.finish_all("OP_NODE_SET_PARAMS")
    records, effects = moves.step(world.records, world.view, world.jobs, world.now, reference)
    (move,) = [e for e in effects if isinstance(e, Submit)]
    refused = node.submit_refused(records["node/n1"], move, "StorageError: disk full", 1.0)
    assert refused.blocked["web3"].reason == "StorageError: disk full"
    assert refused.events[-1][2] == "web3: migration job refused: StorageError: disk full"
    world.records = {**records, "node/n1": refused}
    assert not [e for e in world.step() if isinstance(e, Submit)]  # no loop
    world.set_node("n3")  # room changed: tried again
    assert [e for e in world.step() if isinstance(e, Submit)]
