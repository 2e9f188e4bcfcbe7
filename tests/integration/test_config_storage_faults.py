"""StorageError on injected ENOSPC / EIO (docs/contracts.md#serials-and-durability): the call fails,
nothing changes.

The real daemon cannot be told to fail a write (and should not be), so this runs wconfd's
own service and RPC server *in this process*, in a thread with its own event loop, on a
real socket reached with the real `WConfdClient`.  The only difference from `lw-wconfd` is
the store's FileOps (its documented fault-injection seam), which fails the next journal
write with a chosen errno.  Afterwards a real `lw-wconfd` opens the same state directory
and must find exactly the acknowledged writes.  (test_config_durability.py shows the same
through the real daemon with a real EFBIG.)
"""

from __future__ import annotations

import asyncio
import collections
import errno
import os
import threading
from pathlib import Path
from typing import Any

import pytest

import wconfd.persistence
import wconfd.service
from client import AsyncWConfdClient, WConfdClient, errors
from client._server.dispatch import build_methods
from client._server.server import RpcServer
from client.api.wconfd import WConfdApi
from wconfd.storage.fileops import FileOps
from wconfd.storage.journal_format import MAGIC
from wconfd.storage.store import LocalStore

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.local_store("injects write errors through LocalStore's FileOps"),
]


class FlakyOps(FileOps):
    """FileOps that fails the next journal record write with `fail` (once)."""

    def __init__(self) -> None:
        self.fail: int | None = None
        self.min_records = 1  # fail only a write of at least this many records
        self.failed = 0

    def _check(self, data: bytes | memoryview) -> None:
        # Only frames (records) fail: zero-filling (preallocation, undo) and snapshots pass,
        # so the store can undo the failed write and stay usable.
        if (
            self.fail is not None
            and bytes(data[:4]) == MAGIC
            and bytes(data).count(MAGIC) >= self.min_records
        ):
            code, self.fail = self.fail, None
            self.failed += 1
            raise OSError(code, os.strerror(code))

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> None:
        self._check(data)
        super().pwrite(fd, data, offset)

    def pwrite_dsync(self, fd: int, data: bytes | memoryview, offset: int) -> None:
        self._check(data)
        super().pwrite_dsync(fd, data, offset)


class InProcessWConfd:
    """WConfd + RpcServer on `socket` in a thread; the store uses `ops`."""

    def __init__(self, state_dir: Path, socket: Path) -> None:
        self.state_dir = state_dir
        self.socket = socket
        self.ready = threading.Event()
        self.error: BaseException | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> InProcessWConfd:
        self._thread.start()
        assert self.ready.wait(10), self.error
        return self

    def stop(self) -> None:
        assert self._loop is not None and self._stop is not None
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)
        assert not self._thread.is_alive()

    def _run(self) -> None:
        try:
            asyncio.run(self._main())
        except BaseException as exc:
            self.error = exc
            self.ready.set()

    async def _main(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        self.socket.parent.mkdir(parents=True, exist_ok=True)
        service = wconfd.service.WConfd(self.state_dir)
        self.service = service
        server = RpcServer(
            self.socket,
            build_methods(WConfdApi, *service.implementations(), guard=service.guard),
            on_disconnect=service.disconnected,
        )
        service.start()
        await server.start()
        self.ready.set()
        try:
            await self._stop.wait()
        finally:
            await server.stop()
            service.close()


@pytest.fixture
def flaky(monkeypatch: pytest.MonkeyPatch) -> FlakyOps:
    """Make wconfd's store use a FlakyOps (for services built in this test)."""
    ops = FlakyOps()

    class FlakyStore(LocalStore[Any, Any]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, file_ops=ops, **kwargs)

    monkeypatch.setattr(wconfd.persistence, "LocalStore", FlakyStore)
    return ops


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_failed_writes_change_nothing_and_wconfd_keeps_serving(daemon_factory, flaky, code):
    real = daemon_factory("wconfd")  # only its dirs for now; started at the end
    inproc = InProcessWConfd(real.state_dir, real.socket).start()
    try:
        wc = WConfdClient(real.socket, name="admin")
        locks = [
            ["cluster/BGL", "exclusive"],
            ["instance/[lockset]", "exclusive"],
            ["node/[lockset]", "exclusive"],
        ]
        assert wc.try_update_locks(locks) == []
        node = wc.add_object("node", {"name": "n1"})
        inst = wc.add_object(
            "instance", {"name": "i1", "primary_node": "n1", "nics": [{"mac": "aa:00:00:00:00:01"}]}
        )
        flt = wc.add_object("filter", {"action": "PAUSE"})
        wc.reserve("ip", "10.0.0.1")
        before = wc.get_config()
        reserved = wc.list_reservations()
        cluster = before["cluster"]

        writes: list[tuple[str, Any]] = [
            ("add node", lambda: wc.add_object("node", {"name": "n2"})),
            ("update node", lambda: wc.update_object("node", {**node, "offline": True})),
            ("update instance", lambda: wc.update_object("instance", {**inst, "memory": 64})),
            ("remove instance", lambda: wc.remove_object("instance", "i1")),
            ("update cluster", lambda: wc.update_object("cluster", {**cluster, "tags": ["t"]})),
            ("add filter", lambda: wc.add_object("filter", {"action": "REJECT"})),
            ("remove filter", lambda: wc.remove_object("filter", flt["uuid"])),
            ("reserve", lambda: wc.reserve("ip", "10.0.0.2")),
            ("release", lambda: wc.release_reservation("ip", "10.0.0.1")),
            ("release all", lambda: wc.release_reservations()),
            ("generate_mac", lambda: wc.generate_mac()),
        ]
        for what, write in writes:
            flaky.fail = code
            with pytest.raises(errors.StorageError) as info:
                write()
            assert info.value.data["type"] == "StorageError", what
            assert info.value.data["errno"] == code, what
            assert "nothing was changed" in info.value.message, what
            assert wc.get_config() == before, what
            assert wc.list_reservations() == reserved, what
            assert wc.wait_config_change(before["serial_no"], 0) == before["serial_no"], what
        assert flaky.failed == len(writes)

        # Still serving, and the same writes now succeed.
        results = {what: write() for what, write in writes[:4]}
        assert results["update instance"].serial_no == 2
        assert wc.get_object("node", "n1")["offline"] is True
        with pytest.raises(errors.NotFound):
            wc.get_object("instance", "i1")
        wc.reserve("ip", "10.0.0.2")
        acknowledged = wc.get_config()
        assert acknowledged["serial_no"] == before["serial_no"] + 4
        reserved = wc.list_reservations()
    finally:
        inproc.stop()

    # The real daemon on the same state dir finds exactly what was acknowledged.
    real.start()
    assert wc.get_config() == acknowledged
    assert wc.list_reservations() == reserved
    assert "Traceback" not in real.log()


def test_a_failed_group_of_pipelined_writes_changes_nothing(daemon_factory, flaky):
    """Writes planned on top of each other and written together fail together."""
    real = daemon_factory("wconfd")
    inproc = InProcessWConfd(real.state_dir, real.socket).start()

    async def scenario() -> tuple[list[Any], dict[str, Any], int]:
        wc = AsyncWConfdClient(real.socket, name="pipeliner")
        assert await wc.try_update_locks([["node/[lockset]", "exclusive"]]) == []
        serial = (await wc.get_config())["serial_no"]
        flaky.fail, flaky.min_records = errno.EIO, 10  # the first big group fails
        results = await asyncio.gather(
            *(wc.add_object("node", {"name": f"n{i % 150}"}) for i in range(300)),
            return_exceptions=True,
        )
        doc = await wc.get_config()
        await wc.close()
        return results, doc, serial

    try:
        results, doc, serial = asyncio.run(scenario())
        max_batch = inproc.service.persistence.store.stats.max_batch
    finally:
        inproc.stop()
    assert flaky.failed == 1 and max_batch >= 10
    names = [f"n{i % 150}" for i in range(300)]
    ok = collections.Counter(n for n, r in zip(names, results, strict=True) if isinstance(r, dict))
    failed = [r for r in results if isinstance(r, errors.StorageError)]
    assert failed, results
    assert all(isinstance(r, dict | errors.StorageError | errors.AlreadyExists) for r in results)
    # At most one add per name won; exactly the winners are in the config, in order.
    assert max(ok.values()) == 1
    present = {n["name"] for n in doc["nodes"].values()}
    assert present == set(ok)
    assert doc["serial_no"] == serial + len(ok)
    # "Already exists" only ever refers to a node that does exist.
    for name, result in zip(names, results, strict=True):
        if isinstance(result, errors.AlreadyExists):
            assert name in present, name
    # A real wconfd agrees.
    real.start()
    assert WConfdClient(real.socket, name="reader").get_config() == doc


@pytest.mark.parametrize("code", [errno.ENOSPC, errno.EIO])
def test_a_lock_change_that_cannot_be_journalled_is_undone(daemon_factory, flaky, code):
    """A failed write changes nothing — for locks too, and waiters are told."""
    real = daemon_factory("wconfd")
    inproc = InProcessWConfd(real.state_dir, real.socket).start()
    try:
        a = WConfdClient(real.socket, name="a")
        b = WConfdClient(real.socket, name="b")
        assert a.try_update_locks([["node/n0", "exclusive"]]) == []
        flaky.fail = code
        with pytest.raises(errors.StorageError):
            a.try_update_locks([["node/n1", "exclusive"]])
        assert a.list_locks() == [["node/n0", "exclusive"]]
        assert b.try_update_locks([["node/n1", "exclusive"]]) == []  # not blocked by a ghost

        async def waiter_told() -> None:
            w = AsyncWConfdClient(real.socket, name="w")
            wait = asyncio.ensure_future(w.update_locks_waiting([["node/n1", "exclusive"]]))
            await asyncio.sleep(0.2)
            flaky.fail = code
            with pytest.raises(errors.StorageError):  # b's release cannot be journalled
                await asyncio.get_running_loop().run_in_executor(None, b.free_locks)
            with pytest.raises(errors.StorageError):
                await wait
            await w.close()

        asyncio.run(waiter_told())
        assert b.list_locks() == [["node/n1", "exclusive"]]
        b.free_locks()
        assert b.list_locks() == []
        held = a.list_all_locks()
    finally:
        inproc.stop()
    real.start()
    assert WConfdClient(real.socket, name="a").list_all_locks() == held
