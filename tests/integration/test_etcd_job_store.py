"""luxid's job store on a real three-member etcd (luxid.storage.etcd;
docs/contracts.md#replicated-control-plane): the seam's promises (round trip through a reopen, ids
never reused, all or nothing, archive), the opcode-running gate across masters, fencing of a deposed
master, and the submit rate.
"""

from __future__ import annotations

import asyncio
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from msgspec.structs import replace

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import EtcdCluster, running_cluster

from client import errors
from client._server.etcd.client import EtcdClient
from client._server.etcd.url import EtcdStoreUrl
from client._server.etcd.wire import cmp_create, op_put
from luxid.jobs import Job, add_log, finish_opcode, mark_opcode_running, new_job, start_job
from luxid.storage.etcd import EtcdJobStore
from luxid.storage.group_commit import GroupCommit
from luxid.takeover import MASTER_FAILOVER, take_over

pytestmark = pytest.mark.timeout(120)

OPS = [{"OP_ID": "OP_TEST_DELAY", "duration": 0}, {"OP_ID": "OP_TEST_DELAY", "duration": 0}]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    with running_cluster(tmp_path_factory.mktemp("etcd")) as c:
        yield c


@pytest.fixture
def url(cluster: EtcdCluster) -> EtcdStoreUrl:
    return EtcdStoreUrl(endpoints=tuple(cluster.endpoints), prefix=f"/t/{uuid.uuid4().hex}")


def take_leader(url: EtcdStoreUrl, node: str) -> int:
    """Play wconfd's election: put the leader key for `node` (deleting a previous holder's)
    on a long lease; its create revision, the fencing token."""

    async def run() -> int:
        async with EtcdClient(url.endpoints) as client:
            key = f"{url.prefix}/leader"
            await client.delete(key)
            lease = await client.lease_grant(300)
            answer = await client.txn([cmp_create(key, 0)], [op_put(key, node, lease=lease.ID)])
            assert answer.succeeded
            return answer.header.revision

    return asyncio.run(run())


def opened(url: EtcdStoreUrl, node: str = "node1", token: int | None = None) -> EtcdJobStore:
    return EtcdJobStore.open(url, node, take_leader(url, node) if token is None else token)


def submit(store: EtcdJobStore, count: int = 1) -> list[Job]:
    first = store.last_job_id + 1
    jobs = [new_job(first + i, OPS, 1000.0) for i in range(count)]
    with store.transaction() as tx:
        tx.insert(jobs)
    return jobs


def test_round_trip_through_reopen_ids_and_logs(url: EtcdStoreUrl) -> None:
    store = opened(url)
    jobs = submit(store, 3)
    assert [j.id for j in jobs] == [1, 2, 3]
    running = mark_opcode_running(start_job(jobs[0], 1001.0, 4242, 1.0), 0, 1002.0)
    logged = add_log(add_log(running, 0, 1003.0, "message", "hello"), 0, 1004.0, "message", "bye")
    with store.transaction() as tx:
        tx.update([logged])
        tx.set_meta("drained", 1)
    store.close()

    again = opened(url)
    try:
        live = again.load_live()
        assert [j.id for j in live] == [1, 2, 3]
        assert live[0] == replace(logged, pending_reason=None)
        assert [e.message for e in live[0].ops[0].log] == ["hello", "bye"]
        assert again.last_job_id == 3
        assert again.meta("drained") == 1
        assert again.gates() == {(1, 0)}
        assert submit(again)[0].id == 4
    finally:
        again.close()


def test_all_or_nothing_and_unknown_updates(url: EtcdStoreUrl) -> None:
    store = opened(url)
    try:
        submit(store, 2)
        with pytest.raises(RuntimeError), store.transaction() as tx:
            tx.insert([new_job(3, OPS, 1.0)])
            raise RuntimeError("the block fails")
        assert store.last_job_id == 2
        with pytest.raises(errors.NotFound), store.transaction() as tx:
            tx.update([new_job(99, OPS, 1.0)])
        with pytest.raises(errors.AlreadyExists), store.transaction() as tx:
            tx.insert([new_job(2, OPS, 1.0)])
        assert [j.id for j in store.load_live()] == [1, 2]
    finally:
        store.close()
    store = opened(url)
    try:
        assert store.last_job_id == 2 and [j.id for j in store.load_live()] == [1, 2]
    finally:
        store.close()


def test_archive_keeps_jobs_readable_and_ids_unused(url: EtcdStoreUrl) -> None:
    store = opened(url)
    (job,) = submit(store)
    first = finish_opcode(mark_opcode_running(job, 0, 2.0), 0, 3.0, True)
    done = finish_opcode(add_log(first, 1, 3.5, "message", "kept"), 1, 4.0, True)
    with store.transaction() as tx:
        tx.update([done])
        assert tx.archive([job.id, 77]) == [job.id]
    assert store.load_live() == []
    archived = store.load_job(job.id)
    assert archived is not None and archived.archived
    assert archived.ops[1].log[0].message == "kept"
    assert store.status_of(job.id) == "success"
    store.close()
    store = opened(url)
    try:
        assert store.load_live() == [] and store.gates() == set()
        assert submit(store)[0].id == job.id + 1
        assert store.auto_archive(time.time(), 10) == ([], 0)
    finally:
        store.close()


def test_gate_keeps_an_opcode_from_starting_twice_across_masters(url: EtcdStoreUrl) -> None:
    old = opened(url, "node1")
    (job,) = submit(old)
    running = mark_opcode_running(start_job(job, 2.0, 4242, 1.0), 0, 3.0)
    with old.transaction() as tx:
        tx.update([running])
    old.close()

    new = opened(url, "node2")
    try:
        (live,) = new.load_live()
        assert new.previous_master is None or new.previous_master != "node2"
        (ended,) = take_over([live], new.gates(), 10.0)
        assert ended.ops[0].status == "error" and ended.ops[0].result == MASTER_FAILOVER
        new.claim([ended])
        # A bug that ran the opcode again from the stored "running" state is refused.
        with pytest.raises(errors.AlreadyExists), new.transaction() as tx:
            new._gates.clear()
            tx.update([running])
    finally:
        new.close()


def test_job_with_no_opcode_started_is_queued_again(url: EtcdStoreUrl) -> None:
    old = opened(url, "node1")
    (job,) = submit(old)
    with old.transaction() as tx:
        tx.update([start_job(job, 2.0, 4242, 1.0)])
    old.close()
    new = opened(url, "node2")
    try:
        (again,) = take_over(new.load_live(), new.gates(), 10.0)
        assert again.process_id is None and {op.status for op in again.ops} == {"queued"}
        new.claim([again])
        assert new.load_live()[0].process_id is None
    finally:
        new.close()


def test_a_deposed_master_writes_nothing(url: EtcdStoreUrl) -> None:
    lost: list[errors.StorageError] = []
    token = take_leader(url, "node1")
    old = EtcdJobStore.open(url, "node1", token, on_lost=lost.append)
    try:
        submit(old)
        take_leader(url, "node2")
        with pytest.raises(errors.StorageError, match="no longer holds the leader key"):
            submit(old)
        assert len(lost) == 1
    finally:
        old.close()
    store = opened(url, "node2")
    try:
        assert store.last_job_id == 1
    finally:
        store.close()


def test_group_commit_submits_at_least_300_jobs_per_second(url: EtcdStoreUrl) -> None:
    """The submit rate target on etcd (docs/contracts.md#performance-targets), through luxid's own
    writer: concurrent submits share commits."""
    store = opened(url)

    async def run(count: int, concurrency: int) -> float:
        writer = GroupCommit(store)
        next_id = store.last_job_id

        async def one() -> None:
            nonlocal next_id
            next_id += 1
            await writer.insert([new_job(next_id, OPS, 1000.0)])

        start = time.perf_counter()
        for first in range(0, count, concurrency):
            await asyncio.gather(*(one() for _ in range(min(concurrency, count - first))))
        elapsed = time.perf_counter() - start
        await writer.close(5.0)
        return count / elapsed

    try:
        rate = asyncio.run(run(2000, 64))
        assert store.last_job_id == 2000
        assert rate >= 300, f"{rate:.0f} submits/s on etcd (target 300)"
    finally:
        store.close()
    again = opened(url)
    try:
        assert len(again.load_live()) == 2000
    finally:
        again.close()
