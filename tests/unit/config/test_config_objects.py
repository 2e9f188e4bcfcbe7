"""Round trips of every object kind, the fresh config, and wire conversion errors."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from cfg_helpers import apply, populated, uuids

from client.errors import InvalidParams
from wconfd.config import KINDS, ConfigDocument, ConfigState, convert_object

SAMPLES: dict[str, dict[str, Any]] = {
    "nodegroup": {"name": "g2", "tags": ["rack1"]},
    "node": {
        "name": "n3",
        "group": "default",
        "primary_ip": "2001:db8::1",
        "offline": True,
        "drained": True,
        "master_candidate": True,
        "vm_capable": False,
        "tags": ["a"],
    },
    "instance": {
        "name": "i2",
        "primary_node": "n1",
        "memory": 2048,
        "vcpus": 4,
        "disks": [{"size": 10, "mode": "ro"}, {"uuid": "disk-x", "size": 20}],
        "nics": [{"mac": "aa:00:00:00:00:99"}],
        "admin_state": "up",
        "tags": ["t"],
    },
    "network": {"name": "net6", "network": "2001:db8::/64", "gateway": "2001:db8::1"},
    "filter": {
        "priority": 3,
        "watermark": 7,
        "predicates": [["jobid", [">", "id", "watermark"]]],
        "action": ["RATE_LIMIT", 2],
        "reason_trail": [["src", "why", 1]],
    },
}


def test_fresh_config() -> None:
    state = ConfigState.fresh(5.0, uuids())
    doc = state.get_config()
    assert doc.cluster.name == "lockwarden"
    assert doc.cluster.max_running_jobs == 20
    assert doc.cluster.mac_prefix == "aa:00:00"
    assert doc.cluster.lock_enforcement == "enforce"
    assert [g.name for g in doc.nodegroups.values()] == ["default"]
    assert not doc.nodes and not doc.instances and not doc.networks and not doc.filters
    assert doc.serial_no == 1 and doc.ctime == doc.mtime == 5.0
    assert doc.version == 1


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_round_trip_every_kind(kind: str) -> None:
    state = populated()
    obj = apply(state, state.add_object(kind, SAMPLES[kind], 500.0, new_uuid=uuids("new")))
    assert obj.serial_no == 1 and obj.ctime == obj.mtime == 500.0
    assert state.get_object(kind, obj.uuid) == obj
    if kind != "filter":
        assert state.get_object(kind, obj.name) == obj
    # The wire form decodes back to the same object, and so does the whole document.
    wire = msgspec.json.decode(msgspec.json.encode(obj))
    assert convert_object(kind, wire) == obj  # type: ignore[arg-type]
    doc = msgspec.json.decode(state.get_config_json(), type=ConfigDocument)
    assert doc == state.get_config()
    assert obj in state.list_objects(kind)
    again = ConfigState.from_json(state.get_config_json())
    assert again.get_config_json() == state.get_config_json()


def test_cluster_round_trip() -> None:
    state = populated()
    cluster = msgspec.to_builtins(state.get_object("cluster", "ignored"))
    cluster.update(
        name="c2", max_running_jobs=5, mac_prefix="AA:BB:CC", lock_enforcement="warn", tags=["x"]
    )
    result = apply(state, state.update_object("cluster", cluster, 600.0))
    assert result == {"serial_no": 2, "mtime": 600.0}
    stored = state.get_object("cluster", None)
    assert stored.name == "c2" and stored.mac_prefix == "aa:bb:cc"  # type: ignore[union-attr]
    assert state.list_objects("cluster") == (stored,)


def test_defaults_and_references_stored_as_uuids() -> None:
    state = populated()
    inst = state.get_object("instance", "i1")
    n1, n2 = state.get_object("node", "n1"), state.get_object("node", "n2")
    net = state.get_object("network", "net1")
    assert inst.primary_node == n1.uuid  # type: ignore[union-attr]
    assert inst.secondary_nodes == (n2.uuid,)  # type: ignore[union-attr]
    assert inst.nics[0].network == net.uuid  # type: ignore[union-attr]
    assert inst.disks[0].uuid and inst.disks[0].mode == "rw"  # type: ignore[union-attr]
    assert inst.admin_state == "down"  # type: ignore[union-attr]
    node = state.get_object("node", "n2")
    default = state.get_object("nodegroup", "default")
    assert node.group == default.uuid  # type: ignore[union-attr]
    assert (node.offline, node.drained, node.master_candidate, node.vm_capable) == (  # type: ignore[union-attr]
        False,
        False,
        False,
        True,
    )


def test_list_order() -> None:
    state = populated()
    for name in ("zz", "aa", "mm"):
        apply(state, state.add_object("nodegroup", {"name": name}, 1.0))
    assert [g.name for g in state.list_objects("nodegroup")] == [  # type: ignore[union-attr]
        "aa",
        "default",
        "mm",
        "zz",
    ]
    for prio in (5, 1, 3):
        apply(state, state.add_object("filter", {"priority": prio}, 1.0))
    assert [f.priority for f in state.list_objects("filter")] == [1, 3, 5]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    ("kind", "data", "needle"),
    [
        ("node", {"name": 5}, "$.name"),
        ("node", {"name": "x", "offline": "yes"}, "$.offline"),
        ("node", {"name": "x", "colour": "red"}, "colour"),
        ("node", {}, "name"),
        ("instance", {"name": "x", "primary_node": "n1", "memory": "1G"}, "$.memory"),
        (
            "instance",
            {"name": "x", "primary_node": "n1", "disks": [{"size": "big"}]},
            "$.disks[0].size",
        ),
        (
            "instance",
            {"name": "x", "primary_node": "n1", "disks": [{"size": 1, "mode": "rx"}]},
            "$.disks[0].mode",
        ),
        (
            "instance",
            {"name": "x", "primary_node": "n1", "admin_state": "running"},
            "$.admin_state",
        ),
        ("cluster", {"lock_enforcement": "strict"}, "$.lock_enforcement"),
        ("network", {"name": "x"}, "network"),
        ("filter", {"priority": 1.5}, "$.priority"),
        ("nodegroup", ["not", "an", "object"], "JSON object"),
    ],
)
def test_ill_typed_input_is_invalid_params(kind: str, data: Any, needle: str) -> None:
    state = populated()
    op = state.update_object if kind == "cluster" else state.add_object
    with pytest.raises(InvalidParams) as err:
        op(kind, data, 1.0)
    assert needle in err.value.message
    assert err.value.message.startswith("object:")


def test_unknown_kind_is_invalid_params() -> None:
    state = populated()
    for call in (
        lambda: state.get_object("disk", "x"),
        lambda: state.list_objects("x"),
        lambda: state.add_object("vm", {}, 1.0),
    ):
        with pytest.raises(InvalidParams, match="kind"):
            call()
    with pytest.raises(InvalidParams, match="key"):
        state.get_object("node", 42)


def test_all_kinds_listed() -> None:
    assert set(KINDS) == {
        "cluster",
        "nodegroup",
        "node",
        "instance",
        "network",
        "filter",
        "drain",
        "budget",
    }
