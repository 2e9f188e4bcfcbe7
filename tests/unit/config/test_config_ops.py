"""add / update / remove semantics: serials, optimistic concurrency, renames, references."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest
from cfg_helpers import apply, populated, uuids

from client.errors import (
    AlreadyExists,
    ConfigValidationError,
    InvalidParams,
    NotFound,
    StaleObjectError,
)
from wconfd.config import ChangeOutOfOrder, ConfigState, PutNode, RemoveObject


def wire(obj: object) -> dict[str, Any]:
    """The object as the client would send it back."""
    data: dict[str, Any] = msgspec.to_builtins(obj)
    return data


def test_add_sets_serial_and_times_whatever_was_sent() -> None:
    state = populated()
    before = state.serial_no
    node = apply(
        state,
        state.add_object(
            "node", {"name": "n7", "serial_no": 42, "ctime": 1.0, "mtime": 2.0}, 700.0
        ),
    )
    assert (node.serial_no, node.ctime, node.mtime) == (1, 700.0, 700.0)
    assert state.serial_no == before + 1 and state.mtime == 700.0


def test_add_generates_uuid_or_keeps_given() -> None:
    state = populated()
    a = apply(state, state.add_object("nodegroup", {"name": "a"}, 1.0, new_uuid=lambda: "gen-1"))
    b = apply(state, state.add_object("nodegroup", {"name": "b", "uuid": "given-2"}, 1.0))
    assert (a.uuid, b.uuid) == ("gen-1", "given-2")


def test_plan_changes_nothing_until_applied() -> None:
    state = populated()
    before = state.get_config_json()
    plan = state.add_object("node", {"name": "n9"}, 1.0)
    state.update_object("node", wire(state.get_object("node", "n1")), 2.0)
    state.remove_object("instance", "i1", 3.0)
    assert state.get_config_json() == before
    assert isinstance(plan.record, PutNode)
    with pytest.raises(NotFound):
        state.get_object("node", "n9")


def test_update_bumps_serial_and_mtime_keeps_ctime() -> None:
    state = populated()
    node = wire(state.get_object("node", "n1"))
    plan = state.update_object("node", node | {"drained": True, "ctime": 0.0}, 900.0)
    assert plan.result == {"serial_no": 2, "mtime": 900.0}
    apply(state, plan)
    stored = state.get_object("node", "n1")
    assert stored.drained and stored.serial_no == 2  # type: ignore[union-attr]
    assert stored.ctime == node["ctime"] and stored.mtime == 900.0
    assert state.mtime == 900.0


def test_stale_update_refused() -> None:
    state = populated()
    node = wire(state.get_object("node", "n1"))
    apply(state, state.update_object("node", node | {"offline": True}, 2.0))
    with pytest.raises(StaleObjectError) as err:
        state.update_object("node", node | {"drained": True}, 3.0)
    assert err.value.data["stored_serial_no"] == 2
    with pytest.raises(StaleObjectError):
        state.update_object("node", node | {"serial_no": 7}, 3.0)


def test_idempotent_retry_counts_as_applied() -> None:
    state = populated()
    inst = wire(state.get_object("instance", "i1"))
    change = inst | {"memory": 4096, "disks": [{"size": 1024}, {"size": 5}]}
    first = state.update_object("instance", change, 2.0, new_uuid=uuids("d"))
    apply(state, first)
    serial = state.serial_no
    retry = state.update_object("instance", change, 9.0)
    assert retry.record is None
    assert retry.result == first.result == {"serial_no": 2, "mtime": 2.0}
    assert state.serial_no == serial
    # The same retry with a real difference is stale, not applied.
    with pytest.raises(StaleObjectError):
        state.update_object("instance", change | {"vcpus": 8}, 9.0)


def test_update_by_name_without_uuid() -> None:
    state = populated()
    node = wire(state.get_object("node", "n2"))
    del node["uuid"]
    apply(state, state.update_object("node", node | {"offline": True}, 2.0))
    assert state.get_object("node", "n2").offline  # type: ignore[union-attr]
    with pytest.raises(NotFound):
        state.update_object("node", {"name": "ghost"}, 2.0)
    with pytest.raises(NotFound):
        state.update_object("node", {"name": "x", "uuid": "ghost"}, 2.0)
    with pytest.raises(ConfigValidationError, match="uuid"):
        state.update_object("filter", {"priority": 1}, 2.0)


def test_rename_keeps_uniqueness_and_index() -> None:
    state = populated()
    n1 = wire(state.get_object("node", "n1"))
    with pytest.raises(AlreadyExists, match="n2"):
        state.update_object("node", n1 | {"name": "n2"}, 2.0)
    plan = state.update_object("node", n1 | {"name": "n1-renamed"}, 2.0)
    assert plan.locks == ("node/n1", "node/n1-renamed")
    apply(state, plan)
    assert state.get_object("node", "n1-renamed").uuid == n1["uuid"]
    with pytest.raises(NotFound):
        state.get_object("node", "n1")
    # The old name is free again.
    apply(state, state.add_object("node", {"name": "n1"}, 3.0))
    # References by uuid still resolve.
    assert state.get_object("instance", "i1").primary_node == n1["uuid"]  # type: ignore[union-attr]


def test_instance_moves_update_reference_indexes() -> None:
    state = populated()
    n1, n2 = state.get_object("node", "n1"), state.get_object("node", "n2")
    inst = wire(state.get_object("instance", "i1"))
    apply(
        state,
        state.update_object(
            "instance", inst | {"primary_node": "n2", "secondary_nodes": [], "nics": []}, 2.0
        ),
    )
    assert state.instances_on_node(n1.uuid) == frozenset()
    assert state.instances_on_node(n2.uuid) == {inst["uuid"]}
    assert not state.mac_in_use("aa:00:00:00:00:01")
    apply(state, state.remove_object("node", "n1", 3.0))
    apply(state, state.remove_object("network", "net1", 4.0))


def test_mac_moves_between_instances_only_when_freed() -> None:
    state = populated()
    with pytest.raises(ConfigValidationError, match="already used by instance 'i1'"):
        state.add_object(
            "instance",
            {"name": "i2", "primary_node": "n2", "nics": [{"mac": "AA:00:00:00:00:01"}]},
            1.0,
        )
    assert state.mac_in_use("AA:00:00:00:00:01")
    inst = wire(state.get_object("instance", "i1"))
    apply(state, state.update_object("instance", inst | {"nics": []}, 2.0))
    apply(
        state,
        state.add_object(
            "instance",
            {"name": "i2", "primary_node": "n2", "nics": [{"mac": "aa:00:00:00:00:01"}]},
            3.0,
        ),
    )


def test_remove_refuses_dangling_references() -> None:
    state = populated()
    with pytest.raises(ConfigValidationError, match="instances use it: i1"):
        state.remove_object("node", "n1", 1.0)
    with pytest.raises(ConfigValidationError, match="instances use it: i1"):
        state.remove_object("node", "n2", 1.0)  # secondary
    with pytest.raises(ConfigValidationError, match="it has nodes: n1, n2"):
        state.remove_object("nodegroup", "default", 1.0)
    with pytest.raises(ConfigValidationError, match="NICs use it: i1"):
        state.remove_object("network", "net1", 1.0)
    apply(state, state.remove_object("instance", "i1", 2.0))
    apply(state, state.remove_object("network", "net1", 2.0))
    apply(state, state.remove_object("node", "n1", 2.0))
    apply(state, state.remove_object("node", "n2", 2.0))
    with pytest.raises(ConfigValidationError, match="last node group"):
        state.remove_object("nodegroup", "default", 3.0)
    apply(state, state.add_object("nodegroup", {"name": "other"}, 3.0))
    apply(state, state.remove_object("nodegroup", "default", 3.0))
    # Without a "default" group, the only group is the default for new nodes.
    node = apply(state, state.add_object("node", {"name": "n5"}, 4.0))
    assert node.group == state.get_object("nodegroup", "other").uuid
    apply(state, state.add_object("nodegroup", {"name": "third"}, 5.0))
    with pytest.raises(ConfigValidationError, match="field group"):
        state.add_object("node", {"name": "n6"}, 6.0)


def test_remove_by_uuid_and_not_found_and_cluster() -> None:
    state = populated()
    f = apply(state, state.add_object("filter", {}, 1.0))
    plan = state.remove_object("filter", f.uuid, 2.0)
    assert isinstance(plan.record, RemoveObject) and plan.result is None and plan.locks == ()
    apply(state, plan)
    with pytest.raises(NotFound):
        state.remove_object("filter", f.uuid, 3.0)
    with pytest.raises(InvalidParams, match="cannot be removed"):
        state.remove_object("cluster", "x", 3.0)
    with pytest.raises(InvalidParams, match="cannot be added"):
        state.add_object("cluster", {}, 3.0)


def test_every_change_bumps_config_serial() -> None:
    state = populated()
    serials = [state.serial_no]
    apply(state, state.add_object("nodegroup", {"name": "g"}, 1.0))
    serials.append(state.serial_no)
    apply(state, state.update_object("nodegroup", wire(state.get_object("nodegroup", "g")), 2.0))
    serials.append(state.serial_no)
    apply(state, state.remove_object("nodegroup", "g", 3.0))
    serials.append(state.serial_no)
    assert serials == list(range(serials[0], serials[0] + 4))
    assert state.mtime == 3.0


def test_apply_refuses_out_of_order_records() -> None:
    state = populated()
    a = state.add_object("nodegroup", {"name": "a"}, 1.0)
    b = state.add_object("nodegroup", {"name": "b"}, 1.0)
    apply(state, a)
    before = state.get_config_json()
    with pytest.raises(ChangeOutOfOrder):
        apply(state, b)  # planned against the state before `a`
    assert state.get_config_json() == before


def test_get_config_json_cached_and_invalidated() -> None:
    state = populated()
    first = state.get_config_json()
    assert state.get_config_json() is first
    apply(state, state.add_object("nodegroup", {"name": "g"}, 1.0))
    assert state.get_config_json() != first


def _grow(state: ConfigState, count: int) -> None:
    node = state.get_object("node", "n1").uuid
    for i in range(count):
        mac = f"aa:01:{i >> 16 & 255:02x}:{i >> 8 & 255:02x}:{i & 255:02x}:00"
        data = {
            "name": f"inst{i}",
            "primary_node": node,
            "disks": [{"size": 100}],
            "nics": [{"mac": mac}],
        }
        apply(state, state.add_object("instance", data, 1.0))


def test_large_config_is_fast() -> None:
    """10,000 instances: get_config encodes well under 50 ms and one-object writes do not
    slow down with size (generous bounds: CI machines are noisy)."""
    small, big = populated(), populated()
    _grow(small, 10)
    _grow(big, 10_000)

    def update_time(state: ConfigState) -> float:
        inst = wire(state.get_object("instance", "inst5"))
        best = 1.0
        for _ in range(200):
            t = time.perf_counter()
            plan = state.update_object("instance", inst, 2.0)
            best = min(best, time.perf_counter() - t)
            apply(state, plan)
            inst["serial_no"] += 1
        return best

    assert update_time(big) < 5 * update_time(small) + 1e-4
    t = time.perf_counter()
    data = big.get_config_json()
    elapsed = time.perf_counter() - t
    assert len(data) > 1_000_000
    assert elapsed < 0.05
