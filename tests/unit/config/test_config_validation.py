"""Each semantic check gives a ConfigValidationError naming the object and the field."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from cfg_helpers import apply, populated

from client.errors import AlreadyExists, ConfigValidationError
from wconfd.config import ConfigDocument, ConfigState

INST = {"name": "ix", "primary_node": "n1"}


@pytest.mark.parametrize(
    ("kind", "data", "field"),
    [
        ("node", {"name": ""}, "name"),
        ("node", {"name": "a/b"}, "name"),
        ("node", {"name": "[lockset]"}, "name"),
        ("node", {"name": " padded"}, "name"),
        ("node", {"name": "x" * 256}, "name"),
        ("node", {"name": "x", "primary_ip": "300.1.1.1"}, "primary_ip"),
        ("node", {"name": "x", "group": "nosuchgroup"}, "group"),
        ("node", {"name": "x", "tags": ["a", "a"]}, "tags"),
        ("node", {"name": "x", "tags": [""]}, "tags"),
        ("node", {"name": "x", "uuid": "has space"}, "uuid"),
        ("node", {"name": "x", "serial_no": -1}, "serial_no"),
        ("instance", {**INST, "memory": 0}, "memory"),
        ("instance", {**INST, "vcpus": -1}, "vcpus"),
        ("instance", {**INST, "disks": [{"size": 0}]}, "disks[0].size"),
        (
            "instance",
            {**INST, "disks": [{"uuid": "d", "size": 1}, {"uuid": "d", "size": 1}]},
            "disks",
        ),
        ("instance", {**INST, "nics": [{"mac": "aa:00:00:00:00"}]}, "nics[0].mac"),
        ("instance", {**INST, "nics": [{"mac": "zz:00:00:00:00:01"}]}, "nics[0].mac"),
        (
            "instance",
            {**INST, "nics": [{"mac": "aa:00:00:00:00:02", "ip": "10.0.0.300"}]},
            "nics[0].ip",
        ),
        (
            "instance",
            {**INST, "nics": [{"mac": "aa:00:00:00:00:02"}, {"mac": "AA:00:00:00:00:02"}]},
            "nics",
        ),
        ("instance", {**INST, "nics": [{"mac": "aa:00:00:00:00:01"}]}, "nics[0].mac"),
        (
            "instance",
            {**INST, "nics": [{"mac": "aa:00:00:00:00:02", "network": "nonet"}]},
            "nics[0].network",
        ),
        (
            "instance",
            {**INST, "nics": [{"mac": "aa:00:00:00:00:02", "network": "net1", "ip": "10.1.0.1"}]},
            "nics[0].ip",
        ),
        ("instance", {"name": "ix", "primary_node": "nosuchnode"}, "primary_node"),
        ("instance", {**INST, "secondary_nodes": ["nosuch"]}, "secondary_nodes[0]"),
        ("instance", {**INST, "secondary_nodes": ["n1"]}, "secondary_nodes[0]"),
        ("instance", {**INST, "secondary_nodes": ["n2", "n2"]}, "secondary_nodes[1]"),
        ("network", {"name": "x", "network": "10.0.0.1/24"}, "network"),
        ("network", {"name": "x", "network": "banana"}, "network"),
        ("network", {"name": "x", "network": "10.2.0.0/24", "gateway": "10.3.0.1"}, "gateway"),
        ("network", {"name": "x", "network": "10.2.0.0/24", "gateway": "::1"}, "gateway"),
        ("network", {"name": "x", "network": "10.2.0.0/24", "gateway": "gw"}, "gateway"),
        ("filter", {"priority": -1}, "priority"),
        ("filter", {"watermark": -5}, "watermark"),
        ("filter", {"action": "accept"}, "action"),
        ("filter", {"action": ["RATE_LIMIT", 0]}, "action"),
        ("filter", {"action": ["RATE_LIMIT", True]}, "action"),
        ("filter", {"action": ["RATE_LIMIT"]}, "action"),
        ("filter", {"action": 7}, "action"),
        ("filter", {"predicates": ["jobid"]}, "predicates[0]"),
        ("nodegroup", {"name": "a/b"}, "name"),
    ],
)
def test_add_validation(kind: str, data: dict[str, Any], field: str) -> None:
    state = populated()
    with pytest.raises(ConfigValidationError) as err:
        state.add_object(kind, data, 1.0)
    assert f"field {field}:" in err.value.message
    assert err.value.data["field"] == field
    assert err.value.message.startswith(kind)


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"max_running_jobs": 0}, "max_running_jobs"),
        ({"mac_prefix": "aa:00"}, "mac_prefix"),
        ({"mac_prefix": "gg:00:00"}, "mac_prefix"),
        ({"name": ""}, "name"),
        ({"uuid": "other"}, "uuid"),
        ({"ctime": float("nan")}, "ctime"),
    ],
)
def test_cluster_validation(changes: dict[str, Any], field: str) -> None:
    state = populated()
    cluster = msgspec.to_builtins(state.cluster) | changes
    with pytest.raises(ConfigValidationError) as err:
        state.update_object("cluster", cluster, 1.0)
    assert f"field {field}:" in err.value.message
    assert err.value.message.startswith("cluster")


def test_names_unique_per_kind_not_across_kinds() -> None:
    state = populated()
    with pytest.raises(AlreadyExists, match="node name 'n1'"):
        state.add_object("node", {"name": "n1"}, 1.0)
    # Another kind may use the same name.
    apply(state, state.add_object("nodegroup", {"name": "n1"}, 1.0))
    # A uuid that is taken, or that equals a name, or a name that equals a uuid.
    n1 = state.get_object("node", "n1")
    with pytest.raises(AlreadyExists, match="uuid"):
        state.add_object("node", {"name": "n9", "uuid": n1.uuid}, 1.0)
    with pytest.raises(AlreadyExists, match="uuid"):
        state.add_object("node", {"name": "n9", "uuid": "n2"}, 1.0)
    with pytest.raises(AlreadyExists, match="is the uuid of another"):
        state.add_object("node", {"name": n1.uuid}, 1.0)


def test_network_change_keeps_nic_ips_inside() -> None:
    state = populated()
    net = msgspec.to_builtins(state.get_object("network", "net1"))
    with pytest.raises(ConfigValidationError, match="field network: instance 'i1' has IP"):
        state.update_object("network", net | {"network": "10.9.0.0/24", "gateway": None}, 1.0)
    apply(state, state.update_object("network", net | {"network": "10.0.0.0/16"}, 1.0))


def test_snapshot_validation_catches_damage() -> None:
    state = populated()
    doc = msgspec.to_builtins(state.get_config())
    node_uuid = next(iter(doc["nodes"]))
    bad = msgspec.json.encode(
        doc | {"nodes": {node_uuid: doc["nodes"][node_uuid] | {"group": "gone"}}}
    )
    with pytest.raises(ConfigValidationError, match="field group"):
        ConfigState.from_json(bad)
    bad = msgspec.json.encode(doc | {"nodes": {"wrongkey": doc["nodes"][node_uuid]}})
    with pytest.raises(ConfigValidationError, match="different key"):
        ConfigState.from_json(bad)
    with pytest.raises(ConfigValidationError, match="at least one node group"):
        ConfigState.from_json(
            msgspec.json.encode(doc | {"nodegroups": {}, "nodes": {}, "instances": {}})
        )
    with pytest.raises(ConfigValidationError, match="version"):
        ConfigState.from_json(msgspec.json.encode(doc | {"version": 2}))
    with pytest.raises(ConfigValidationError, match="Expected"):
        ConfigState.from_json(b'{"cluster": 5}')
    # Two instances with one MAC.
    inst = next(iter(doc["instances"].values()))
    twin = inst | {"uuid": "twin", "name": "twin"}
    with pytest.raises(ConfigValidationError, match="already used"):
        ConfigState.from_json(
            msgspec.json.encode(doc | {"instances": {inst["uuid"]: inst, "twin": twin}})
        )
    assert ConfigState.from_json(state.get_config_json()).get_config() == ConfigDocument(
        **{f: getattr(state.get_config(), f) for f in ConfigDocument.__struct_fields__}
    )
