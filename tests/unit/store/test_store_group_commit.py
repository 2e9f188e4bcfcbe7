"""luxid's group commit (luxid.storage.group_commit) over a real SQLite job store: where each
commit runs (client._server.write_placement) and that every write lands, in order — each
test on a plain loop and, as the daemons run (3.12+), with tasks started eagerly."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from client._server.server import install_eager_tasks
from client._server.write_placement import SyncMode
from luxid.jobs import Job, new_job
from luxid.storage import SqliteJobStore
from luxid.storage.group_commit import GroupCommit
from luxid.storage.sqlite import SqliteTransaction

OPS = [{"OP_ID": "OP_TEST_DELAY", "duration": 0}]
LOOP_THREAD = "loop"


class RecordingStore(SqliteJobStore):
    """A SQLite job store that notes which thread ran each transaction."""

    threads: list[str]

    @contextmanager
    def transaction(self) -> Iterator[SqliteTransaction]:
        name = threading.current_thread().name
        self.threads.append(LOOP_THREAD if name == "MainThread" else name)
        with super().transaction() as tx:
            yield tx


def open_store(tmp_path: Path, mode: SyncMode = "auto") -> RecordingStore:
    store = RecordingStore.open(tmp_path / "jobs.sqlite")
    store.threads = []
    store.sync_mode = mode
    return store


def sharing_only(writer: GroupCommit) -> GroupCommit:
    """`writer` placing batches by sharing alone: what these tests are about.  A slow disk
    sends batches to the worker too (a commit over 2 ms on average), and under CI's load
    a commit on tmp took that long, so the disk's speed is left out here."""
    writer._placement.inline_threshold = float("inf")
    return writer


def jobs(first: int, count: int = 1) -> list[Job]:
    return [new_job(i, OPS, 1000.0) for i in range(first, first + count)]


Run = Callable[[Callable[[], Awaitable[None]]], None]


@pytest.fixture(
    params=[
        False,
        pytest.param(
            True,
            marks=pytest.mark.skipif(sys.version_info < (3, 12), reason="eager tasks: 3.12+"),
        ),
    ],
    ids=["lazy-tasks", "eager-tasks"],
)
def run(request: pytest.FixtureRequest) -> Run:
    """Run a test's `main()` on a fresh loop, with the daemons' eager task factory or not."""

    def runner(main: Callable[[], Awaitable[None]]) -> None:
        async def wrapped() -> None:
            if request.param:
                install_eager_tasks(asyncio.get_running_loop())
            await main()

        asyncio.run(wrapped())

    return runner


def test_a_lone_writer_commits_on_the_event_loop(tmp_path: Path, run: Run) -> None:
    store = open_store(tmp_path)

    async def main() -> None:
        writer = sharing_only(GroupCommit(store))
        for i in range(1, 6):
            await writer.insert(jobs(i))  # one at a time: never shared
        assert await writer.close(5.0)

    run(main)
    assert store.threads == [LOOP_THREAD] * 5
    assert sorted(store.load_jobs(range(1, 6))) == [1, 2, 3, 4, 5]
    store.close()


def test_shared_batches_go_to_the_worker_and_a_lone_writer_comes_back(
    tmp_path: Path, run: Run
) -> None:
    store = open_store(tmp_path)

    async def main() -> None:
        writer = sharing_only(GroupCommit(store))
        # Three writers at once: one batch, written where the last one was (the loop);
        # it shows the sharing, so the next batch goes to the worker.
        await asyncio.gather(*(writer.insert(jobs(i)) for i in (1, 2, 3)))
        await asyncio.gather(*(writer.insert(jobs(i)) for i in (4, 5)))
        await writer.insert(jobs(6))  # after a shared batch: still the worker
        await writer.insert(jobs(7))  # alone again: back on the loop
        assert await writer.close(5.0)

    run(main)
    worker = [t for t in store.threads if t != LOOP_THREAD]
    assert store.threads[0] == LOOP_THREAD and store.threads[-1] == LOOP_THREAD
    assert len(worker) == 2 and all(t.startswith("luxid-store") for t in worker)
    assert sorted(store.load_jobs(range(1, 8))) == list(range(1, 8))
    store.close()


def test_a_remote_store_and_store_calls_never_run_on_the_loop(tmp_path: Path, run: Run) -> None:
    store = open_store(tmp_path, "thread")
    called_on: list[str] = []

    async def main() -> None:
        writer = GroupCommit(store)
        await writer.insert(jobs(1))
        await writer.insert(jobs(2))
        await writer.call(lambda s: called_on.append(threading.current_thread().name))
        assert await writer.close(5.0)

    run(main)
    assert store.threads and LOOP_THREAD not in store.threads
    assert called_on and called_on[0].startswith("luxid-store")
    store.close()


def test_store_calls_run_on_the_worker_even_for_a_lone_writer(tmp_path: Path, run: Run) -> None:
    store = open_store(tmp_path)
    called_on: list[str] = []

    async def main() -> None:
        writer = GroupCommit(store)
        await writer.insert(jobs(1))
        await writer.call(lambda s: called_on.append(threading.current_thread().name))
        await writer.insert(jobs(2))
        assert await writer.close(5.0)

    run(main)
    assert store.threads == [LOOP_THREAD, LOOP_THREAD]
    assert called_on and called_on[0].startswith("luxid-store")
    store.close()


def test_a_closed_group_commit_refuses_writes_at_once(tmp_path):
    """A write queued after close (a call that ends as its term does) fails at once with
    StorageError; it is never left waiting for a worker that is gone."""
    from client import errors
    from luxid.storage.group_commit import GroupCommit
    from luxid.storage.sqlite import SqliteJobStore

    async def go() -> None:
        store = SqliteJobStore.open(tmp_path / "jobs.sqlite")
        group = GroupCommit(store)
        assert await group.close(1.0)
        with pytest.raises(errors.StorageError, match="closed"):
            await asyncio.wait_for(group.run(lambda tx: tx.set_meta("drained", 1)), 1.0)
        store.close()

    asyncio.run(go())
