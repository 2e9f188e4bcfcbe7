"""Temporary reservations (docs/contracts.md#temporary-reservations) across real client processes
and wconfd restarts."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest

from client import WConfdClient, errors

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.parametrize("wconfd", ["local", "etcd"], indirect=True),  # local files and etcd
]

# Another process: reserves what it is told, generates MACs, reports, then waits.
HOLDER = textwrap.dedent(
    """
    import json, sys
    from client import WConfdClient
    wc = WConfdClient(sys.argv[1], job_id=int(sys.argv[2]))
    for namespace, value in json.loads(sys.argv[3]):
        wc.reserve(namespace, value)
    macs = [wc.generate_mac() for _ in range(int(sys.argv[4]))]
    print(json.dumps({"client_id": wc.client_id, "macs": macs}), flush=True)
    sys.stdin.readline()
    """
)

MAC_RE = re.compile(r"[0-9a-f]{2}(:[0-9a-f]{2}){5}")


class Holder:
    """A reservation-holding client process."""

    def __init__(self, socket: Any, job_id: int, reserve: list[list[str]], macs: int = 0):
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-c",
                HOLDER,
                str(socket),
                str(job_id),
                json.dumps(reserve),
                str(macs),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        assert line, "holder failed"
        info = json.loads(line)
        self.client_id: str = info["client_id"]
        self.macs: list[str] = info["macs"]

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()


@pytest.fixture
def holders():
    made: list[Holder] = []

    def make(*args: Any, **kwargs: Any) -> Holder:
        holder = Holder(*args, **kwargs)
        made.append(holder)
        return holder

    yield make
    for holder in made:
        holder.kill()


def wait_until(predicate: Any, timeout: float = 5.0) -> float:
    """Poll until `predicate()` is true; the seconds it took (fails at the timeout)."""
    t0 = time.monotonic()
    while not predicate():
        assert time.monotonic() - t0 < timeout, "condition not reached"
        time.sleep(0.005)
    return time.monotonic() - t0


def test_conflicts_across_processes_and_listing(wconfd, holders):
    other = holders(wconfd.socket, 7, [["ip", "10.0.0.5"], ["mac", "AA:00:00:00:00:09"]])
    me = WConfdClient(wconfd.socket, name="me")
    for namespace, value in [("ip", "10.0.0.5"), ("mac", "aa:00:00:00:00:09")]:
        with pytest.raises(errors.ReservationError) as info:
            me.reserve(namespace, value)
        assert info.value.data["type"] == "ReservationError"
        assert info.value.data["owner"] == other.client_id
        assert other.client_id in info.value.message
    # The same value in another namespace is another reservation.
    me.reserve("hostname", "10.0.0.5")
    me.reserve("ip", "10.0.0.6")
    me.reserve("ip", "10.0.0.6")  # reserving one's own again is fine
    assert me.list_reservations() == sorted(
        [
            [other.client_id, "ip", "10.0.0.5"],
            [other.client_id, "mac", "aa:00:00:00:00:09"],  # stored lower case
            [me.client_id, "hostname", "10.0.0.5"],
            [me.client_id, "ip", "10.0.0.6"],
        ]
    )
    clients = {c.client_id: c for c in me.list_clients()}
    assert clients[other.client_id].job_id == 7
    assert clients[other.client_id].pid == other.proc.pid
    assert sorted(clients[other.client_id].reservations) == [
        ["ip", "10.0.0.5"],
        ["mac", "aa:00:00:00:00:09"],
    ]
    assert sorted(clients[me.client_id].reservations) == [
        ["hostname", "10.0.0.5"],
        ["ip", "10.0.0.6"],
    ]
    # Releasing what one does not hold is a no-op, not someone else's loss.
    me.release_reservation("ip", "10.0.0.5")
    assert [other.client_id, "ip", "10.0.0.5"] in me.list_reservations()
    me.release_reservation("ip", "10.0.0.6")
    me.release_reservations("hostname")
    assert all(owner == other.client_id for owner, _, _ in me.list_reservations())
    with pytest.raises(errors.InvalidParams):
        me.reserve("mac", "not-a-mac")


def test_generate_mac_uses_the_prefix_and_avoids_used_macs(wconfd, holders):
    other = holders(wconfd.socket, 8, [], macs=20)
    me = WConfdClient(wconfd.socket, name="me")
    assert (
        me.try_update_locks(
            [
                ["cluster/BGL", "exclusive"],
                ["instance/[lockset]", "exclusive"],
                ["node/n1", "exclusive"],
            ]
        )
        == []
    )
    me.add_object("node", {"name": "n1"})
    mine = [me.generate_mac() for _ in range(50)]
    for mac in other.macs + mine:
        assert MAC_RE.fullmatch(mac) and mac.startswith("aa:00:00:"), mac
    assert len(set(other.macs + mine)) == 70  # unique across both processes
    reserved = {(owner, value) for owner, ns, value in me.list_reservations() if ns == "mac"}
    assert reserved == {(other.client_id, m) for m in other.macs} | {
        (me.client_id, m) for m in mine
    }

    # A MAC the config uses cannot be reserved.
    me.add_object(
        "instance", {"name": "i1", "primary_node": "n1", "nics": [{"mac": "aa:00:00:12:34:56"}]}
    )
    with pytest.raises(errors.ReservationError) as info:
        me.reserve("mac", "AA:00:00:12:34:56")
    assert "configuration" in info.value.message
    # Using one's own generated MAC in an instance is the point of reserving it.
    me.add_object("instance", {"name": "i2", "primary_node": "n1", "nics": [{"mac": mine[0]}]})

    # The cluster's prefix is what generate_mac uses.
    cluster = me.get_object("cluster")
    me.update_object("cluster", {**cluster, "mac_prefix": "02:AB:CD"})
    assert me.generate_mac().startswith("02:ab:cd:")


def test_reservations_released_when_the_owner_is_killed(wconfd, holders):
    other = holders(wconfd.socket, 9, [["ip", "10.0.0.7"]], macs=3)
    me = WConfdClient(wconfd.socket, name="me")
    assert len(me.list_reservations()) == 4
    with pytest.raises(errors.ReservationError):
        me.reserve("ip", "10.0.0.7")
    other.kill()  # SIGKILL: the process cannot release anything itself
    took = wait_until(lambda: me.list_reservations() == [])
    assert took < 0.5, took  # pidfd death detection: within 100 ms
    assert other.client_id not in {c.client_id for c in me.list_clients()}
    me.reserve("ip", "10.0.0.7")
    for mac in other.macs:
        me.reserve("mac", mac)


def test_reservations_survive_a_wconfd_restart_while_their_owner_lives(wconfd, holders):
    alive = holders(wconfd.socket, 10, [["ip", "10.0.0.8"]], macs=2)
    doomed = holders(wconfd.socket, 11, [["ip", "10.0.0.9"]])
    me = WConfdClient(wconfd.socket, name="me")
    before = me.list_reservations()
    assert len(before) == 4

    wconfd.kill()  # crash; one owner dies while wconfd is down
    doomed.kill()
    wconfd.start()
    after = me.list_reservations()
    assert after == [r for r in before if r[0] != doomed.client_id]
    with pytest.raises(errors.ReservationError):
        me.reserve("ip", "10.0.0.8")
    me.reserve("ip", "10.0.0.9")  # the dead owner's is free again
    assert "died while wconfd was down" in wconfd.log()
    clients = {c.client_id: c for c in me.list_clients()}
    assert sorted(clients[alive.client_id].reservations) == sorted(
        [["ip", "10.0.0.8"]] + [["mac", m] for m in alive.macs]
    )

    # A clean restart keeps them too; the restored owner is still watched for death.
    assert wconfd.stop() == 0
    wconfd.start()
    assert [alive.client_id, "ip", "10.0.0.8"] in me.list_reservations()
    alive.kill()
    wait_until(lambda: all(r[0] == me.client_id for r in me.list_reservations()))
