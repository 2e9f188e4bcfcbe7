"""Room on nodes (client.capacity, docs/contracts.md#room-on-nodes): properties of the one pure
placement rule."""

from __future__ import annotations

from typing import Any

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from client.capacity import (
    DEFAULT_CTOTAL,
    DEFAULT_MTOTAL,
    DEFAULT_VCPU_RATIO,
    choose,
    config_rooms,
    no_room_message,
    node_full_message,
    rooms,
)

RATIOS = st.sampled_from([1.0, 2.0, 4.0, 0.5])

nodes_st = st.lists(
    st.fixed_dictionaries(
        {
            "mtotal": st.integers(0, 16384),
            "ctotal": st.integers(0, 8),
            "offline": st.booleans(),
            "drained": st.booleans(),
            "vm_capable": st.booleans(),
        }
    ),
    min_size=0,
    max_size=6,
).map(lambda ns: [{**n, "uuid": f"u{i}", "name": f"node{i}"} for i, n in enumerate(ns)])

sizes_st = st.tuples(st.integers(1, 8192), st.integers(1, 16))


def _placed(nodes: list[dict[str, Any]], requests: list[tuple[int, int]], ratio: float) -> Any:
    """Place each request with `choose`, as the opcodes do; the instances that found room."""
    instances: list[dict[str, Any]] = []
    for i, (memory, vcpus) in enumerate(requests):
        room = choose(rooms(nodes, instances, ratio).values(), memory, vcpus)
        if room is not None:
            instances.append({"name": f"i{i}", "primary_node": room.uuid, "memory": memory,
                              "vcpus": vcpus, "admin_state": "up"})  # fmt: skip
    return instances


@settings(max_examples=300, deadline=None)
@given(nodes_st, st.lists(sizes_st, max_size=30), RATIOS)
def test_placement_never_exceeds_memory_or_cpu_limits(
    nodes: list[dict[str, Any]], requests: list[tuple[int, int]], ratio: float
) -> None:
    instances = _placed(nodes, requests, ratio)
    by_uuid = {n["uuid"]: n for n in nodes}
    for uuid, room in rooms(nodes, instances, ratio).items():
        assert room.mused <= by_uuid[uuid]["mtotal"]
        assert room.cused <= by_uuid[uuid]["ctotal"] * ratio
        mine = [i for i in instances if i["primary_node"] == uuid]
        assert room.mused == sum(i["memory"] for i in mine)
        node = by_uuid[uuid]
        if mine:  # only eligible nodes are ever chosen
            assert not node["offline"] and not node["drained"] and node["vm_capable"]


@settings(max_examples=300, deadline=None)
@given(nodes_st, st.lists(sizes_st, max_size=12), sizes_st, RATIOS, st.data())
def test_chosen_node_has_the_most_free_memory_among_those_that_fit(
    nodes: list[dict[str, Any]],
    before: list[tuple[int, int]],
    size: tuple[int, int],
    ratio: float,
    data: st.DataObject,
) -> None:
    instances = _placed(nodes, before, ratio)
    current = rooms(nodes, instances, ratio)
    exclude = data.draw(st.sets(st.sampled_from(sorted(current) or ["none"])))
    memory, vcpus = size
    chosen = choose(current.values(), memory, vcpus, exclude)
    fitting = [
        r for r in current.values()
        if r.eligible and r.uuid not in exclude
        and r.mfree >= memory and r.cused + vcpus <= r.ctotal * ratio
    ]  # fmt: skip
    if not fitting:
        assert chosen is None
        message = no_room_message("web3", memory, vcpus, current.values(), exclude)
        assert message.startswith(f"no node has room for web3: it needs {memory} MiB and")
        return
    assert chosen is not None and chosen in fitting
    assert chosen.mfree == max(r.mfree for r in fitting)
    assert chosen.name == min(r.name for r in fitting if r.mfree == chosen.mfree)


def test_only_running_instances_use_room_and_defaults_apply() -> None:
    nodes = [{"uuid": "a", "name": "a"}]
    instances = [
        {"primary_node": "a", "memory": 1000, "vcpus": 3, "admin_state": "up"},
        {"primary_node": "a", "memory": 5000, "vcpus": 7, "admin_state": "down"},
        {"primary_node": "a", "memory": 5000, "vcpus": 7, "admin_state": "offline"},
    ]
    (room,) = rooms(nodes, instances, DEFAULT_VCPU_RATIO).values()
    assert (room.mtotal, room.ctotal) == (DEFAULT_MTOTAL, DEFAULT_CTOTAL)
    assert room.mfree == DEFAULT_MTOTAL - 1000 and room.cfree == DEFAULT_CTOTAL * 4 - 3


def test_config_rooms_reads_the_cluster_policy() -> None:
    config = {
        "cluster": {"ipolicy": {"vcpu-ratio": 2.0}},
        "nodes": {"a": {"uuid": "a", "name": "a", "mtotal": 100, "ctotal": 2}},
        "instances": {},
    }
    assert config_rooms(config)["a"].climit == 4.0
    assert choose(config_rooms(config).values(), 50, 5) is None


def test_messages_say_what_is_short_and_where_the_most_room_is() -> None:
    nodes = [
        {"uuid": "1", "name": "node1", "mtotal": 1024},
        {"uuid": "3", "name": "node3", "mtotal": 2048},
        {"uuid": "4", "name": "node4", "mtotal": 9999, "drained": True},
    ]
    current = rooms(nodes, [], 4.0)
    assert choose(current.values(), 4096, 2) is None
    assert no_room_message("web3", 4096, 2, current.values()) == (
        "no node has room for web3: it needs 4096 MiB and 2 CPUs; most free: node3 with 2048 MiB"
    )
    assert node_full_message("web3", 4096, 2, current["1"]) == (
        "node node1 has no room for web3: it needs 4096 MiB and 2 CPUs;"
        " it has 1024 MiB and 128 CPUs free"
    )
    cpu_short = rooms([{"uuid": "1", "name": "node1", "ctotal": 1}], [], 1.0)
    assert no_room_message("db", 10, 2, cpu_short.values()).endswith(
        "most free: node1 with 65536 MiB but 1 CPU free"
    )
    assert no_room_message("db", 10, 1, current.values(), exclude=["1", "3"]).endswith(
        "no online, non-drained, vm_capable node can take it"
    )


def test_documents_without_capacity_fields_load_with_the_defaults() -> None:
    """A configuration written before room on nodes (no mtotal/ctotal/ipolicy) loads unchanged."""
    from wconfd.config.objects import ConfigDocument

    old = {
        "cluster": {"uuid": "c", "name": "lockwarden"},
        "nodes": {"n": {"uuid": "n", "name": "n1", "group": "g"}},
    }
    doc = msgspec.convert(old, ConfigDocument)
    assert doc.nodes["n"].mtotal == DEFAULT_MTOTAL and doc.nodes["n"].ctotal == DEFAULT_CTOTAL
    plain = msgspec.to_builtins(doc)
    assert plain["cluster"]["ipolicy"]["vcpu-ratio"] == DEFAULT_VCPU_RATIO
    assert plain["cluster"]["ipolicy"]["disk-templates"][0] == "sharedfile"
    assert config_rooms(plain)["n"].mfree == DEFAULT_MTOTAL
