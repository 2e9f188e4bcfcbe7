"""client.config_writer.ConfigWriter against a real wconfd."""

from __future__ import annotations

import subprocess
import sys

import pytest

from client import WConfdClient, errors
from client.config_writer import ConfigWriter, NodeInstances

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def cfg(wconfd) -> ConfigWriter:
    wc = WConfdClient(wconfd.socket, job_id=1)
    assert (
        wc.try_update_locks(
            [
                ["cluster/BGL", "exclusive"],
                ["instance/[lockset]", "exclusive"],
                ["nodegroup/[lockset]", "exclusive"],
                ["node/[lockset]", "exclusive"],
                ["network/[lockset]", "exclusive"],
            ]
        )
        == []
    )
    return ConfigWriter(wc)


def test_reads_return_wire_dicts_or_none(cfg):
    cluster = cfg.get_cluster()
    assert cluster["name"] == "lockwarden" and cluster == cfg.client.get_object("cluster")
    default = cfg.get_nodegroup_info("default")
    assert default is not None and cfg.get_nodegroup_info(default["uuid"]) == default
    assert cfg.get_all_nodegroups_info() == {default["uuid"]: default}
    for missing in (
        cfg.get_node_info("ghost"),
        cfg.get_instance_info("ghost"),
        cfg.get_network_info("ghost"),
        cfg.get_filter_info("ghost"),
        cfg.get_nodegroup_info("ghost"),
    ):
        assert missing is None
    assert cfg.get_all_nodes_info() == cfg.get_all_instances_info() == {}
    assert cfg.get_all_networks_info() == {}
    with pytest.raises(errors.NotFound):
        cfg.get_node_instances("ghost")


def test_adds_updates_removes_and_node_instances(cfg):
    serial = cfg.get_config_serial()
    n1 = cfg.add_node({"name": "n1"})
    n2 = cfg.add_node({"name": "n2", "primary_ip": "10.0.0.2"})
    n3 = cfg.add_node({"name": "n3"})
    net = cfg.add_network({"name": "lan", "network": "10.0.0.0/24"})
    group = cfg.add_nodegroup({"name": "g1"})
    i1 = cfg.add_instance({"name": "i1", "primary_node": "n1", "secondary_nodes": ["n2"]})
    i2 = cfg.add_instance(
        {"name": "i2", "primary_node": "n2", "nics": [{"mac": cfg.generate_mac()}]}
    )
    i3 = cfg.add_instance({"name": "i3", "primary_node": n1["uuid"]})
    assert cfg.get_config_serial() == serial + 8
    assert i1["primary_node"] == n1["uuid"] and i1["secondary_nodes"] == [n2["uuid"]]
    assert cfg.get_node_info("n1") == n1 and cfg.get_node_info(n2["uuid"]) == n2
    assert cfg.get_instance_info("i2") == i2
    assert cfg.get_network_info("lan") == net
    assert set(cfg.get_all_nodes_info()) == {n1["uuid"], n2["uuid"], n3["uuid"]}
    assert cfg.get_all_instances_info() == {i["uuid"]: i for i in (i1, i2, i3)}
    assert cfg.get_all_networks_info() == {net["uuid"]: net}

    on_n1 = cfg.get_node_instances("n1")
    assert isinstance(on_n1, NodeInstances)
    assert sorted(i["name"] for i in on_n1.primary) == ["i1", "i3"] and on_n1.secondary == []
    on_n2 = cfg.get_node_instances(n2["uuid"])
    assert [i["name"] for i in on_n2.primary] == ["i2"]
    assert [i["name"] for i in on_n2.secondary] == ["i1"]
    assert cfg.get_node_instances("n3") == NodeInstances([], [])

    # update() refreshes the caller's dict so it can go again without re-reading.
    inst = cfg.get_instance_info("i1")
    assert inst is not None
    inst["memory"] = 512
    first = cfg.update("instance", inst)
    assert inst["serial_no"] == first["serial_no"] == 2
    inst["memory"] = 1024
    assert cfg.update("instance", inst)["serial_no"] == 3
    assert cfg.get_instance_info("i1") == inst
    stale = dict(i1, memory=64)
    with pytest.raises(errors.StaleObjectError):
        cfg.update("instance", stale)
    cluster = cfg.get_cluster()
    cfg.update("cluster", {**cluster, "tags": ["prod"]})
    assert cfg.get_cluster()["tags"] == ["prod"]
    flt = cfg.add("filter", {"action": "PAUSE"})
    assert cfg.get_filter_info(flt["uuid"]) == flt

    with pytest.raises(errors.ConfigValidationError):
        cfg.remove("node", "n1")  # i1 and i3 use it
    for kind, key in [("instance", "i1"), ("instance", "i3"), ("node", "n1"), ("nodegroup", "g1")]:
        cfg.remove(kind, key)
    assert cfg.get_node_info("n1") is None
    assert cfg.get_nodegroup_info(group["uuid"]) is None
    assert cfg.wait_for_change(cfg.get_config_serial(), 0.05) == cfg.get_config()["serial_no"]


def test_errors_pass_through_unchanged(wconfd):
    cfg = ConfigWriter(WConfdClient(wconfd.socket, name="lockless"))
    with pytest.raises(errors.LockNotHeld):
        cfg.add_node({"name": "n1"})
    with pytest.raises(errors.InvalidParams):
        cfg.add_instance({"name": "i1"})  # primary_node missing


def test_reservations(cfg, wconfd):
    mac = cfg.generate_mac()
    assert mac.startswith("aa:00:00:")
    cfg.reserve("ip", "10.0.0.9")
    other = ConfigWriter(WConfdClient(wconfd.socket, name="other"))
    with pytest.raises(errors.ReservationError):
        other.reserve("ip", "10.0.0.9")
    with pytest.raises(errors.ReservationError):
        other.reserve("mac", mac)
    me = cfg.client.client_id
    assert sorted(cfg.client.list_reservations()) == [[me, "ip", "10.0.0.9"], [me, "mac", mac]]
    cfg.release("ip", "10.0.0.9")
    other.reserve("ip", "10.0.0.9")
    cfg.release_all()
    other.reserve("mac", mac)


def test_config_writer_imports_no_daemon_package():
    code = (
        "import sys, client.config_writer; "
        "bad = sorted(m for m in sys.modules "
        "if m.split('.')[0] in {'wconfd', 'luxid', 'jobproc', 'rapi'}); "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
