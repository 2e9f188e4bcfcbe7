"""wconfd's configuration (docs/contracts.md#configuration) through the real socket: objects,
errors, locks, waits.

Every test talks to a real `lw-wconfd` (the `wconfd` fixture) through `WConfdClient`; error checks
look at the raised class *and* at `data.type`, the wire contract (docs/contracts.md#errors).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import pytest

from client import AsyncWConfdClient, WConfdClient, errors

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.parametrize("wconfd", ["local", "etcd"], indirect=True),  # local files and etcd
]

ALL_LOCKSETS = [
    ["instance/[lockset]", "exclusive"],
    ["nodegroup/[lockset]", "exclusive"],
    ["node/[lockset]", "exclusive"],
    ["network/[lockset]", "exclusive"],
]


def admin(wconfd: Any, name: str = "admin") -> WConfdClient:
    """A client holding every map level's lockset exclusively (may write any object)."""
    wc = WConfdClient(wconfd.socket, name=name)
    assert wc.try_update_locks(ALL_LOCKSETS) == []
    return wc


def raises(exc_type: type[errors.RpcError], call: Any, *args: Any, **kwargs: Any) -> Any:
    """Call and expect `exc_type`; check data.type matches; return the error."""
    with pytest.raises(exc_type) as info:
        call(*args, **kwargs)
    assert info.value.data["type"] == exc_type.__name__
    return info.value


def test_fresh_state_dir_has_cluster_and_default_group(wconfd):
    wc = WConfdClient(wconfd.socket, name="reader")
    doc = wc.get_config()
    assert set(doc) == {
        "version",
        "serial_no",
        "ctime",
        "mtime",
        "cluster",
        "nodegroups",
        "nodes",
        "instances",
        "networks",
        "filters",
        "drains",
        "budgets",
    }
    assert doc["drains"] == {}
    assert doc["budgets"] == {}
    assert doc["version"] == 1
    assert doc["cluster"]["name"] == "lockwarden"
    assert doc["cluster"]["lock_enforcement"] == "enforce"
    assert doc["cluster"]["mac_prefix"] == "aa:00:00"
    assert doc["cluster"]["max_running_jobs"] == 20
    assert [g["name"] for g in doc["nodegroups"].values()] == ["default"]
    assert doc["nodes"] == doc["instances"] == doc["networks"] == doc["filters"] == {}
    assert wc.get_object("cluster") == doc["cluster"]
    assert wc.get_object("nodegroup", "default") == next(iter(doc["nodegroups"].values()))
    assert wc.list_objects("cluster") == [doc["cluster"]]


def test_round_trip_of_every_map_kind(wconfd):
    wc = admin(wconfd)
    serial = wc.get_config()["serial_no"]

    group = wc.add_object("nodegroup", {"name": "rack1", "tags": ["a"]})
    node = wc.add_object("node", {"name": "n1", "group": "rack1", "primary_ip": "10.0.0.1"})
    node2 = wc.add_object("node", {"name": "n2"})  # joins "default"
    net = wc.add_object("network", {"name": "lan", "network": "10.1.0.0/16"})
    inst = wc.add_object(
        "instance",
        {
            "name": "i1",
            "primary_node": "n1",
            "secondary_nodes": ["n2"],
            "memory": 512,
            "disks": [{"size": 1024}],
            "nics": [{"mac": "AA:00:00:00:00:01", "ip": "10.1.0.5", "network": "lan"}],
        },
    )
    flt = wc.add_object("filter", {"priority": 5, "action": "PAUSE", "predicates": []})
    added = {
        "nodegroup": group,
        "node": node,
        "instance": inst,
        "network": net,
        "filter": flt,
    }
    # References given by name are stored as uuids; values normalised; serials set.
    assert node["group"] == group["uuid"]
    assert node2["group"] == wc.get_object("nodegroup", "default")["uuid"]
    assert inst["primary_node"] == node["uuid"]
    assert inst["secondary_nodes"] == [node2["uuid"]]
    assert inst["nics"] == [{"mac": "aa:00:00:00:00:01", "ip": "10.1.0.5", "network": net["uuid"]}]
    assert inst["disks"][0]["uuid"] and inst["disks"][0]["mode"] == "rw"
    assert inst["vcpus"] == 1 and inst["admin_state"] == "down"
    for kind, obj in added.items():
        assert obj["serial_no"] == 1 and obj["ctime"] == obj["mtime"] > 0, kind
        assert wc.get_object(kind, obj["uuid"]) == obj, kind
        if kind != "filter":
            assert wc.get_object(kind, obj["name"]) == obj, kind
        assert obj in wc.list_objects(kind), kind
    doc = wc.get_config()
    assert doc["serial_no"] == serial + 6
    assert doc["instances"] == {inst["uuid"]: inst}
    assert doc["filters"] == {flt["uuid"]: flt}

    # Update each one: serial_no + 1, mtime moves, ctime stays; the change is visible.
    changes = {
        "nodegroup": {"tags": ["a", "b"]},
        "node": {"offline": True},
        "instance": {"memory": 1024, "admin_state": "up"},
        "network": {"gateway": "10.1.0.1"},
        "filter": {"action": ["RATE_LIMIT", 3]},
    }
    for kind, change in changes.items():
        before = wc.get_object(kind, added[kind]["uuid"])
        result = wc.update_object(kind, {**before, **change})
        assert result.serial_no == before["serial_no"] + 1
        assert result.mtime >= before["mtime"]
        after = wc.get_object(kind, before["uuid"])
        assert after == {**before, **change, "serial_no": result.serial_no, "mtime": result.mtime}
    assert wc.get_config()["serial_no"] == serial + 11

    # Remove in dependency order; each is gone afterwards.
    for kind, key in [
        ("filter", flt["uuid"]),
        ("instance", "i1"),
        ("network", "lan"),
        ("node", "n1"),
        ("node", "n2"),
        ("nodegroup", "rack1"),
    ]:
        assert wc.remove_object(kind, key) is None
        raises(errors.NotFound, wc.get_object, kind, key)
    doc = wc.get_config()
    assert doc["serial_no"] == serial + 17
    assert doc["nodes"] == doc["instances"] == doc["networks"] == doc["filters"] == {}
    assert [g["name"] for g in doc["nodegroups"].values()] == ["default"]


def test_cluster_get_and_update(wconfd):
    wc = WConfdClient(wconfd.socket, name="admin")
    assert wc.try_update_locks([["cluster/BGL", "exclusive"]]) == []
    cluster = wc.get_object("cluster", "ignored-key")
    result = wc.update_object(
        "cluster", {**cluster, "max_running_jobs": 7, "mac_prefix": "02:AB:CD", "tags": ["x"]}
    )
    assert result.serial_no == cluster["serial_no"] + 1
    after = wc.get_object("cluster")
    assert after["max_running_jobs"] == 7
    assert after["mac_prefix"] == "02:ab:cd"  # normalised
    assert after["uuid"] == cluster["uuid"] and after["ctime"] == cluster["ctime"]
    raises(errors.InvalidParams, wc.add_object, "cluster", {"name": "second"})
    raises(errors.InvalidParams, wc.remove_object, "cluster", "lockwarden")
    err = raises(
        errors.ConfigValidationError,
        wc.update_object,
        "cluster",
        {**after, "max_running_jobs": 0},
    )
    assert err.data["field"] == "max_running_jobs"


def test_validation_error_classes(wconfd):
    wc = admin(wconfd)
    wc.add_object("node", {"name": "n1"})
    inst = wc.add_object(
        "instance", {"name": "i1", "primary_node": "n1", "nics": [{"mac": "aa:00:00:00:00:01"}]}
    )
    serial = wc.get_config()["serial_no"]

    # ConfigValidationError: bad values and unresolvable references, naming the field.
    for kind, obj, field in [
        ("instance", {"name": "i2", "primary_node": "nope"}, "primary_node"),
        ("instance", {"name": "i2", "primary_node": "n1", "memory": 0}, "memory"),
        ("node", {"name": "n2", "group": "nope"}, "group"),
        ("node", {"name": "a/b"}, "name"),
        ("node", {"name": "n2", "primary_ip": "not-an-ip"}, "primary_ip"),
        ("network", {"name": "lan", "network": "10.0.0.1/8"}, "network"),
        (
            "instance",
            {"name": "i2", "primary_node": "n1", "nics": [{"mac": "AA:00:00:00:00:01"}]},
            "nics[0].mac",
        ),
    ]:
        err = raises(errors.ConfigValidationError, wc.add_object, kind, obj)
        assert err.data["field"] == field, err.message
        assert field in err.message

    # FilterError: a rule gets replace_filter's add-time checks, whichever path writes it.
    err = raises(errors.FilterError, wc.add_object, "filter", {"action": "BOGUS"})
    assert "action" in err.message

    # AlreadyExists: a taken name, a taken uuid.
    raises(errors.AlreadyExists, wc.add_object, "node", {"name": "n1"})
    raises(errors.AlreadyExists, wc.add_object, "instance", {**inst, "name": "other"})
    # NotFound: get, update and remove of something absent.
    raises(errors.NotFound, wc.get_object, "node", "ghost")
    raises(errors.NotFound, wc.update_object, "node", {"name": "ghost"})
    raises(errors.NotFound, wc.remove_object, "instance", "ghost")
    # StaleObjectError: serial_no behind the stored one.
    wc.update_object("instance", {**inst, "memory": 256})
    err = raises(errors.StaleObjectError, wc.update_object, "instance", {**inst, "memory": 512})
    assert err.data["stored_serial_no"] == 2
    # InvalidParams naming the field (ill-typed, unknown field, missing required field)
    # or the param (unknown kind).
    for kind, obj, named in [
        ("node", {"name": 5}, "$.name"),
        ("instance", {"name": "i3", "primary_node": "n1", "memory": "lots"}, "$.memory"),
        ("node", {"name": "n3", "colour": "red"}, "colour"),
        ("instance", {"name": "i3"}, "primary_node"),
    ]:
        err = raises(errors.InvalidParams, wc.add_object, kind, obj)
        assert named in err.message, err.message
    err = raises(errors.InvalidParams, wc.get_object, "gizmo", "x")
    assert "kind" in err.message
    err = raises(errors.InvalidParams, wc.wait_config_change, 0, -1)
    assert "timeout" in err.message
    # Nothing of the above changed the configuration except the one good update.
    assert wc.get_config()["serial_no"] == serial + 1


def test_errors_on_the_wire_carry_data_type(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    pid = __import__("os").getpid()
    start = __import__("psutil").Process(pid).create_time()
    ident = (
        b'{"jsonrpc":"2.0","method":"identify","id":1,"params":{"job_id":null,"pid":%d,'
        b'"start_time":%r,"name":"raw"}}\n' % (pid, start)
    )
    assert "result" in conn.call(ident)
    answer = conn.call(
        b'{"jsonrpc":"2.0","method":"get_object","id":2,"params":{"kind":"node","key":"x"}}\n'
    )
    assert answer["error"]["code"] == -32022
    assert answer["error"]["data"]["type"] == "NotFound"
    answer = conn.call(
        b'{"jsonrpc":"2.0","method":"add_object","id":3,'
        b'"params":{"kind":"node","object":{"name":"n1"}}}\n'
    )
    assert answer["error"]["code"] == -32024
    assert answer["error"]["data"]["type"] == "LockNotHeld"
    assert answer["error"]["data"]["locks"] == ["node/n1"]


def test_lock_enforcement_enforce_mode(wconfd):
    wc = WConfdClient(wconfd.socket, name="job")
    other = WConfdClient(wconfd.socket, name="other")

    # No lock: LockNotHeld naming the lock to take; nothing written.
    serial = wc.get_config()["serial_no"]
    err = raises(errors.LockNotHeld, wc.add_object, "node", {"name": "n1"})
    assert err.data["locks"] == ["node/n1"]
    assert "node/n1" in err.message and "node/[lockset]" in err.message
    # A shared lock is not enough.
    assert wc.try_update_locks([["node/n1", "shared"]]) == []
    raises(errors.LockNotHeld, wc.add_object, "node", {"name": "n1"})
    assert wc.get_config()["serial_no"] == serial
    # The member lock exclusively: allowed.
    assert wc.try_update_locks([["node/n1", "exclusive"]]) == []
    node = wc.add_object("node", {"name": "n1"})
    # ... but only for that member, and only for its holder.
    raises(errors.LockNotHeld, wc.add_object, "node", {"name": "n2"})
    raises(errors.LockNotHeld, other.update_object, "node", {**node, "offline": True})
    wc.free_locks()
    raises(errors.LockNotHeld, wc.update_object, "node", {**node, "offline": True})
    # The level's lockset exclusively covers every member, present and future.
    assert wc.try_update_locks([["node/[lockset]", "exclusive"]]) == []
    wc.add_object("node", {"name": "n2"})
    wc.update_object("node", {**node, "offline": True})
    # A rename needs the old and the new name.
    wc.free_locks()
    assert wc.try_update_locks([["node/n2", "exclusive"]]) == []
    n2 = wc.get_object("node", "n2")
    err = raises(errors.LockNotHeld, wc.update_object, "node", {**n2, "name": "n3"})
    assert err.data["locks"] == ["node/n3"]
    assert wc.try_update_locks([["node/n3", "exclusive"]]) == []
    wc.update_object("node", {**n2, "name": "n3"})
    # Removal needs the lock too.
    raises(errors.LockNotHeld, wc.remove_object, "node", "n1")

    # Instances, node groups, networks: their own level.
    for kind, obj in [
        ("nodegroup", {"name": "g1"}),
        ("network", {"name": "lan", "network": "192.168.0.0/24"}),
        ("instance", {"name": "i1", "primary_node": "n3"}),
    ]:
        err = raises(errors.LockNotHeld, wc.add_object, kind, obj)
        assert err.data["locks"] == [f"{kind}/{obj['name']}"]
    wc.free_locks()  # lock order: instance < nodegroup < node
    assert wc.try_update_locks([["instance/i1", "exclusive"], ["nodegroup/g1", "exclusive"]]) == []
    wc.add_object("nodegroup", {"name": "g1"})
    wc.add_object("instance", {"name": "i1", "primary_node": "n3"})
    assert wc.try_update_locks([["network/[lockset]", "exclusive"]]) == []
    wc.add_object("network", {"name": "lan", "network": "192.168.0.0/24"})

    # The cluster object needs cluster/BGL exclusively.
    cluster = wc.get_object("cluster")
    err = raises(errors.LockNotHeld, other.update_object, "cluster", {**cluster, "tags": ["t"]})
    assert err.data["locks"] == ["cluster/BGL"]
    assert other.try_update_locks([["cluster/BGL", "shared"]]) == []
    raises(errors.LockNotHeld, other.update_object, "cluster", {**cluster, "tags": ["t"]})
    assert other.try_update_locks([["cluster/BGL", "exclusive"]]) == []
    other.update_object("cluster", {**cluster, "tags": ["t"]})

    # Filters need no lock at all.
    nobody = WConfdClient(wconfd.socket, name="nobody")
    flt = nobody.add_object("filter", {"action": "REJECT"})
    nobody.update_object("filter", {**flt, "priority": 3})
    nobody.remove_object("filter", flt["uuid"])


def test_lock_enforcement_warn_mode_logs_and_allows(wconfd):
    wc = WConfdClient(wconfd.socket, name="admin")
    raises(errors.LockNotHeld, wc.add_object, "node", {"name": "n1"})
    assert wc.try_update_locks([["cluster/BGL", "exclusive"]]) == []
    cluster = wc.get_object("cluster")
    wc.update_object("cluster", {**cluster, "lock_enforcement": "warn"})
    wc.free_locks()

    node = wc.add_object("node", {"name": "n1"})  # no lock held: allowed, with a warning
    wc.update_object("node", {**node, "drained": True})
    assert wc.get_object("node", "n1")["drained"] is True
    deadline = time.monotonic() + 5
    while "lock enforcement (warn mode)" not in wconfd.log() and time.monotonic() < deadline:
        time.sleep(0.02)
    warnings = [line for line in wconfd.log().splitlines() if "warn mode" in line]
    assert any("WARNING" in line and "node/n1" in line for line in warnings), warnings
    assert any(wc.client_id in line for line in warnings), warnings

    # Back to enforce (the cluster itself is written without BGL in warn mode).
    cluster = wc.get_object("cluster")
    wc.update_object("cluster", {**cluster, "lock_enforcement": "enforce"})
    raises(errors.LockNotHeld, wc.add_object, "node", {"name": "n2"})


def test_stale_and_idempotent_updates(wconfd):
    wc = admin(wconfd)
    wc.add_object("node", {"name": "n1"})
    inst = wc.add_object("instance", {"name": "i1", "primary_node": "n1", "disks": [{"size": 8}]})
    first = wc.update_object("instance", {**inst, "memory": 256})
    assert first.serial_no == 2
    serial = wc.get_config()["serial_no"]
    # The identical retry (serial_no the one the update was made against) counts as applied:
    # same answer, nothing written, even with the disk uuid left out as the first time.
    again = wc.update_object("instance", {**inst, "memory": 256})
    assert (again.serial_no, again.mtime) == (first.serial_no, first.mtime)
    assert wc.get_config()["serial_no"] == serial
    # A different change against the old serial is stale.
    err = raises(errors.StaleObjectError, wc.update_object, "instance", {**inst, "memory": 384})
    assert "re-read" in err.message
    # Re-read and retry works; a serial ahead of the stored one is stale too.
    current = wc.get_object("instance", "i1")
    assert wc.update_object("instance", {**current, "memory": 384}).serial_no == 3
    raises(errors.StaleObjectError, wc.update_object, "instance", {**current, "serial_no": 9})
    assert wc.get_object("instance", "i1")["memory"] == 384
    # Updating by name without uuid is allowed (the name finds the object).
    current = wc.get_object("instance", "i1")
    del current["uuid"]
    assert wc.update_object("instance", {**current, "vcpus": 2}).serial_no == 4


def test_referential_integrity_on_remove(wconfd):
    wc = admin(wconfd)
    wc.add_object("nodegroup", {"name": "g1"})
    wc.add_object("node", {"name": "n1", "group": "g1"})
    wc.add_object("node", {"name": "n2", "group": "g1"})
    wc.add_object("network", {"name": "lan", "network": "10.0.0.0/24"})
    wc.add_object(
        "instance",
        {
            "name": "i1",
            "primary_node": "n1",
            "secondary_nodes": ["n2"],
            "nics": [{"mac": "aa:00:00:00:00:01", "network": "lan"}],
        },
    )
    serial = wc.get_config()["serial_no"]
    for kind, key, users in [
        ("node", "n1", ["i1"]),
        ("node", "n2", ["i1"]),  # secondary counts too
        ("nodegroup", "g1", ["n1", "n2"]),
        ("network", "lan", ["i1"]),
    ]:
        err = raises(errors.ConfigValidationError, wc.remove_object, kind, key)
        assert err.data["users"] == users, err.data
    # An update that would point at something absent is refused the same way.
    raises(
        errors.ConfigValidationError,
        wc.update_object,
        "node",
        {**wc.get_object("node", "n1"), "group": "ghost"},
    )
    assert wc.get_config()["serial_no"] == serial
    wc.remove_object("instance", "i1")
    wc.remove_object("node", "n1")
    wc.remove_object("node", "n2")
    wc.remove_object("network", "lan")
    wc.remove_object("nodegroup", "g1")
    # The last node group cannot go.
    raises(errors.ConfigValidationError, wc.remove_object, "nodegroup", "default")


WRITER = textwrap.dedent(
    """
    import sys, time
    from client import WConfdClient
    wc = WConfdClient(sys.argv[1], name="writer")
    wc.ping()
    print("ready", flush=True)
    sys.stdin.readline()
    flt = wc.add_object("filter", {"action": "ACCEPT"})
    print(repr(time.time()), flush=True)
    """
)


def test_wait_config_change_woken_by_another_process(wconfd):
    wc = WConfdClient(wconfd.socket, name="watcher")
    serial = wc.get_config()["serial_no"]
    writer = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(wconfd.socket)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout.readline().strip() == "ready"
        woke: list[float] = []
        result: list[int] = []

        def watch() -> None:
            result.append(wc.wait_config_change(serial, 30))
            woke.append(time.time())

        watcher = threading.Thread(target=watch)
        watcher.start()
        time.sleep(0.3)  # the watcher is parked in the daemon
        assert not woke
        writer.stdin.write("go\n")
        writer.stdin.flush()
        acked = float(writer.stdout.readline())
        watcher.join(10)
        assert result == [serial + 1]
        # Woken by the other process's write within 100 ms of its acknowledgement.
        assert woke[0] - acked < 0.1, woke[0] - acked
    finally:
        writer.kill()
        writer.wait()


def test_wait_config_change_returns_at_once_or_times_out(wconfd):
    wc = admin(wconfd)
    serial = wc.get_config()["serial_no"]
    # Already newer: immediate.
    t0 = time.monotonic()
    assert wc.wait_config_change(serial - 1, 10) == serial
    assert time.monotonic() - t0 < 1
    # Nothing changes: the current serial at the timeout.
    t0 = time.monotonic()
    assert wc.wait_config_change(serial, 0.3) == serial
    assert 0.25 <= time.monotonic() - t0 < 2
    assert wc.wait_config_change(serial, 0) == serial
    # A reservation is not a config change.
    wc.reserve("ip", "10.0.0.1")
    assert wc.wait_config_change(serial, 0.1) == serial


def test_concurrent_writes_are_serialised_in_groups(wconfd):
    """Pipelined writes share disk flushes but each is planned on the previous ones."""

    async def scenario() -> None:
        wc = AsyncWConfdClient(wconfd.socket, name="pipeliner")
        assert await wc.try_update_locks([["node/[lockset]", "exclusive"]]) == []
        serial = (await wc.get_config())["serial_no"]
        # Every name twice, all in flight at once: exactly one add of each wins.
        results = await asyncio.gather(
            *(wc.add_object("node", {"name": f"n{i % 100}"}) for i in range(200)),
            return_exceptions=True,
        )
        added = [r for r in results if isinstance(r, dict)]
        assert sorted(r["name"] for r in added) == sorted(f"n{i}" for i in range(100))
        assert all(isinstance(r, errors.AlreadyExists) for r in results if r not in added)
        # Different updates against one serial_no: one wins, the rest are stale.
        node = added[0]
        results = await asyncio.gather(
            *(wc.update_object("node", {**node, "tags": [f"t{i}"]}) for i in range(20)),
            return_exceptions=True,
        )
        assert sum(not isinstance(r, BaseException) for r in results) == 1
        assert sum(isinstance(r, errors.StaleObjectError) for r in results) == 19
        # Identical updates: the first applies, the rest are the idempotent retry of it.
        results = await asyncio.gather(
            *(wc.update_object("node", {**added[1], "offline": True}) for _ in range(10))
        )
        assert len({(r.serial_no, r.mtime) for r in results}) == 1
        doc = await wc.get_config()
        assert doc["serial_no"] == serial + 102
        assert len(doc["nodes"]) == 100
        await wc.close()

    asyncio.run(scenario())
