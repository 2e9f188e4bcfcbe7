"""Leader election on a real three-member etcd (docs/contracts.md#replicated-control-plane): exactly
one master; resign and stop hand over; a master killed (-9) or frozen (SIGSTOP) longer than its TTL
is replaced within TTL + margin, and the frozen one, once thawed, has stepped down and writes
nothing; a master cut off from etcd steps down by its own clock before anyone else can win.

Candidates run in-process (several clients, one event loop) or as their own processes
(`etcd_testlib.Candidate`) where the test kills or freezes them.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import Candidate, EtcdCluster, running_cluster

from client._server.etcd.client import EtcdClient
from client._server.etcd.election import Term
from client._server.etcd.errors import Fenced
from client._server.etcd.leader import LeaderElection
from client._server.etcd.presence import NodeInfo, Presence, list_nodes
from client._server.etcd.wire import op_put

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]

TTL = 3.0
MARGIN = 2.0  # etcd checks lease expiry every 0.5 s; the rest is scheduling under load


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(tmp_path_factory.mktemp("etcd")) as c:
        yield c


@pytest.fixture
def prefix() -> str:
    return f"/t/{uuid.uuid4().hex}"


class Node:
    """An in-process candidate with its own client, recording its role changes."""

    def __init__(self, endpoints: list[str], prefix: str, name: str) -> None:
        self.client = EtcdClient(endpoints)
        self.terms: list[tuple[float, Term]] = []
        self.deposed: list[tuple[float, str]] = []
        self.election = LeaderElection(
            self.client,
            prefix=prefix,
            node=name,
            ttl=TTL,
            on_elected=lambda term: self.terms.append((time.monotonic(), term)),
            on_deposed=lambda why: self.deposed.append((time.monotonic(), why)),
        )

    async def close(self) -> None:
        await self.election.stop()
        await self.client.close()


async def wait_until(predicate: object, timeout: float) -> float:
    """Poll `predicate()` until true; returns when it became true (monotonic)."""
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not met within {timeout} s")
        await asyncio.sleep(0.02)
    return time.monotonic()


def leaders(nodes: list[Node]) -> list[Node]:
    return [n for n in nodes if n.election.is_leader]


def test_three_candidates_elect_exactly_one_and_hand_over(
    cluster: EtcdCluster, prefix: str
) -> None:
    async def main() -> None:
        nodes = [Node(cluster.endpoints, prefix, f"node{i}") for i in range(3)]
        try:
            for n in nodes:
                n.election.start()
            await wait_until(lambda: leaders(nodes), 10)
            # Stays exactly one for a few renewals, and everyone agrees who it is.
            for _ in range(30):
                assert len(leaders(nodes)) == 1
                await asyncio.sleep(0.1)
            first = leaders(nodes)[0]
            name = first.election.node
            assert [await n.election.current_master() for n in nodes] == [name] * 3
            term1 = first.election.term
            assert term1 is not None and first.terms[-1][1] == term1

            # resign (lw cluster failover): another node wins, with a greater term.
            successor = await first.election.resign(wait=10)
            assert successor is not None and successor != name
            assert first.deposed[-1][1] == "resigned" and not first.election.is_leader
            await wait_until(lambda: len(leaders(nodes)) == 1, 5)
            second = leaders(nodes)[0]
            assert second.election.node == successor
            assert second.election.term is not None and second.election.term.token > term1.token
            with pytest.raises(Fenced):
                first.election.writer()
            writer = second.election.writer()
            assert second.election.writer() is writer  # one chain per name and term
            assert second.election.writer("luxid") is not writer
            await writer.commit([op_put(f"{prefix}/x", "1")])
            await second.election.writer("luxid").commit([op_put(f"{prefix}/y", "1")])

            # stop() gives the key up at once: the last standing node takes over fast.
            stopped_at = time.monotonic()
            await second.election.stop()
            third = next(n for n in nodes if n is not first and n is not second)
            won_at = await wait_until(
                lambda: third.election.is_leader or first.election.is_leader, 5
            )
            assert won_at - stopped_at < 1.5  # the watch sees the delete, no TTL to wait for
        finally:
            for n in nodes:
                await n.close()

    asyncio.run(main())


def test_a_lone_candidate_that_resigns_answers_once_it_wins_again(
    cluster: EtcdCluster, prefix: str
) -> None:
    """With no standby up, `lw cluster failover --wait 60` answers after the node's pause
    of one TTL and its election, naming itself: it no longer waits out the whole minute
    (a hostile `wait` of 1e16 s held the call for good)."""

    async def main() -> None:
        node = Node(cluster.endpoints, prefix, "alone")
        try:
            node.election.start()
            await wait_until(lambda: node.election.is_leader, 10)
            started = time.monotonic()
            master = await node.election.resign(wait=60)
            assert master == "alone" and node.election.is_leader
            assert node.deposed[-1][1] == "resigned"
            assert time.monotonic() - started < 10 * TTL  # a pause and an election
        finally:
            await node.close()

    asyncio.run(main())


def first_elected(pair: list[Candidate]) -> tuple[Candidate, Candidate, dict[str, Any]]:
    """(master, standby, the master's elected event) once one of two candidates has won."""
    for c in pair:
        c.wait_for("started", 15)
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        for i, c in enumerate(pair):
            with contextlib.suppress(TimeoutError):
                event = c.next_event(0.05)
                if event["event"] == "elected":
                    return c, pair[1 - i], event
    raise TimeoutError("no candidate was elected within 15 s")


def test_kill9_of_the_master_process_lets_a_standby_win_within_ttl(
    cluster: EtcdCluster, prefix: str
) -> None:
    candidates = [Candidate(cluster.endpoints, prefix, f"node{i}", TTL) for i in range(2)]
    try:
        old, new, first = first_elected(candidates)
        killed_at = time.monotonic()
        old.proc.kill()
        elected = new.wait_for("elected", TTL + MARGIN + 1)
        assert elected["token"] > first["token"]
        assert elected["t"] - killed_at <= TTL + MARGIN
    finally:
        for c in candidates:
            c.close()


def test_a_frozen_master_is_replaced_and_once_thawed_writes_nothing(
    cluster: EtcdCluster, prefix: str
) -> None:
    candidates = [Candidate(cluster.endpoints, prefix, f"node{i}", TTL) for i in range(2)]
    try:
        old, new, elected = first_elected(candidates)
        old_term = elected["token"]
        assert old.write(f"{prefix}/cfg", "before")["ok"]

        frozen_at = time.monotonic()
        old.signal(signal.SIGSTOP)
        elected = new.wait_for("elected", TTL + MARGIN + 1)
        assert elected["token"] > old_term
        assert elected["t"] - frozen_at <= TTL + MARGIN
        time.sleep(0.5)
        old.signal(signal.SIGCONT)

        # On waking it sees its deadline has passed by its own clock, so it serves nothing
        # until etcd proves the lease alive; etcd says it lapsed (or does not answer in time).
        deposed = old.wait_for("deposed", 5)
        assert deposed["reason"].startswith(("etcd says the lease has expired", "could not renew"))
        written = old.write(f"{prefix}/cfg", "from the old master")
        assert written == {**written, "ok": False, "error": "Fenced"}
        assert new.write(f"{prefix}/cfg", "after")["ok"]

        async def read() -> bytes | None:
            async with EtcdClient(cluster.endpoints) as client:
                kv = await client.get(f"{prefix}/cfg")
                return kv.value if kv else None

        assert asyncio.run(read()) == b"after"
    finally:
        for c in candidates:
            c.close()


def test_a_master_cut_off_from_etcd_steps_down_before_anyone_can_win(
    cluster: EtcdCluster, prefix: str
) -> None:
    async def main() -> None:
        # The master talks to one member only; the standby to the two others.
        cut = cluster.members[0]
        master = Node([cut.client_url], prefix, "master")
        standby = Node([m.client_url for m in cluster.members[1:]], prefix, "standby")
        try:
            master.election.start()
            await wait_until(lambda: master.election.is_leader, 10)
            standby.election.start()
            await asyncio.sleep(1.2)  # a few renewals through the member
            paused_at = time.monotonic()
            cut.pause()
            # It stops acting as master at its deadline (last renewal sent + TTL less the
            # margin; renewals go every TTL/3), by its own clock...
            stopped_at = await wait_until(lambda: not master.election.holds_lease(), TTL + 1)
            assert stopped_at - paused_at <= TTL + 0.5
            won_at = await wait_until(lambda: standby.election.is_leader, TTL + MARGIN + 5)
            assert won_at >= stopped_at
            assert standby.terms[0][1].token > master.terms[0][1].token
            # ...and steps down once etcd has not proved the lease alive for one more TTL.
            await wait_until(lambda: master.deposed, TTL + 1)
            assert "could not renew" in master.deposed[0][1]
        finally:
            cut.resume()
            await master.close()
            await standby.close()
        cluster.wait_healthy()

    asyncio.run(main())


def test_presence_lists_the_nodes_that_run(cluster: EtcdCluster, prefix: str) -> None:
    async def main() -> None:
        async with EtcdClient(cluster.endpoints) as client:
            nodes = [
                Presence(client, prefix=prefix, info=NodeInfo(node=f"node{i}", since=i), ttl=TTL)
                for i in range(3)
            ]
            for n in nodes:
                n.start()
            try:

                async def names() -> list[str]:
                    return [n.node for n in await list_nodes(client, prefix)]

                deadline = time.monotonic() + 10
                while await names() != ["node0", "node1", "node2"]:
                    assert time.monotonic() < deadline
                    await asyncio.sleep(0.05)
                await client.put(f"{prefix}/nodes/garbage", "not json")
                await nodes[1].stop()
                assert await names() == ["node0", "node2"]
                # A node whose lease was lost (etcd restored from a backup, say) comes back.
                await client.lease_revoke(nodes[2].lease)
                assert await names() == ["node0"]
                while await names() != ["node0", "node2"]:
                    assert time.monotonic() < deadline + TTL
                    await asyncio.sleep(0.05)
            finally:
                for n in nodes:
                    await n.stop()

    asyncio.run(main())
