"""etcd member failures (docs/contracts.md#replicated-control-plane): with one of three members
killed the service goes on; with two killed every call fails within its time budget as a
StorageError, nothing is half-written and the master steps down; with the members back the service
resumes.

Each test gets its own cluster, since it kills members.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import EtcdCluster, running_cluster

from client._server.etcd.client import EtcdClient
from client._server.etcd.leader import LeaderElection
from client._server.etcd.wire import op_put
from client.errors import StorageError

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

TIMEOUT = 2.0  # a short budget per call, where calls are to fail
TTL = 3.0


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[EtcdCluster]:
    with running_cluster(tmp_path) as c:
        yield c


async def until_leader(elections: list[LeaderElection], timeout: float) -> LeaderElection:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for e in elections:
            if e.is_leader:
                return e
        await asyncio.sleep(0.05)
    raise TimeoutError(f"no master within {timeout} s")


def test_one_member_killed_the_service_goes_on(cluster: EtcdCluster) -> None:
    async def main() -> None:
        # Kill the raft leader, and the member the client talks to: the worst case (writes
        # forwarded to it are lost; no write commits until the others elect a new leader).
        doomed = cluster.leader()
        endpoints = [doomed.client_url] + [e for e in cluster.endpoints if e != doomed.client_url]
        async with EtcdClient(endpoints) as client:  # the default budget
            elections = [
                LeaderElection(client, prefix="/f1", node=f"node{i}", ttl=TTL) for i in range(2)
            ]
            for e in elections:
                e.start()
            try:
                writer = (await until_leader(elections, 10)).writer()
                await writer.commit([op_put("/f1/data/0", "before")])
                # With a pooled connection to it open, the next write is lost on the wire
                # and must be sent again, exactly once.
                doomed.kill()
                for i in range(1, 50):
                    revision = await writer.commit([op_put(f"/f1/data/{i}", "during")])
                    kv = await client.get(f"/f1/data/{i}")
                    assert kv is not None and kv.value == b"during"
                    assert kv.mod_revision == revision and kv.version == 1
                master = await until_leader(elections, TTL + 5)
                await master.writer().commit([op_put("/f1/data/fenced", "ok")])
                assert (await client.range("/f1/data/", prefix=True, count_only=True)).count == 51
            finally:
                for e in elections:
                    await e.stop()

    asyncio.run(main())


def test_two_members_killed_calls_fail_fast_then_resume(cluster: EtcdCluster) -> None:
    async def main() -> None:
        async with EtcdClient(cluster.endpoints, timeout=TIMEOUT) as client:
            deposed: list[str] = []
            election = LeaderElection(
                client, prefix="/f2", node="node1", ttl=TTL, on_deposed=deposed.append
            )
            election.start()
            try:
                writer = (await until_leader([election], 10)).writer()
                await writer.commit([op_put("/f2/base", "1")])
                for m in cluster.members[1:]:
                    m.kill()

                async def fails_fast(call: object) -> StorageError:
                    started = time.monotonic()
                    with pytest.raises(StorageError) as info:
                        await call  # type: ignore[misc]
                    assert time.monotonic() - started < TIMEOUT + 1.5
                    assert info.value.to_wire()["data"]["type"] == "StorageError"
                    return info.value

                read_error = await fails_fast(client.get("/f2/base"))
                assert "quorum" in read_error.message
                txn = [op_put(f"/f2/batch/{i}", "x") for i in range(20)]
                await fails_fast(client.txn([], txn))
                await fails_fast(client.put("/f2/base", "2"))
                await fails_fast(writer.commit([op_put("/f2/base", "3")]))

                # The master cannot renew: it steps down within its TTL.
                for _ in range(int(TTL / 0.05) + 40):
                    if deposed:
                        break
                    await asyncio.sleep(0.05)
                assert deposed and "renew" in deposed[0]

                for m in cluster.members[1:]:
                    m.start()
                await asyncio.to_thread(cluster.wait_healthy)
                # All or nothing: the transaction whose outcome was unknown is never half there.
                batch = (await client.range("/f2/batch/", prefix=True, count_only=True)).count
                assert batch in (0, 20)
                await client.put("/f2/after", "ok")
                assert (await client.get("/f2/after")) is not None
                master = await until_leader([election], TTL + 10)
                await master.writer().commit([op_put("/f2/fenced", "ok")])
            finally:
                await election.stop()

    asyncio.run(main())
