"""How a stub rides out a daemon that goes away (docs/contracts.md#python-client-stubs): it waits
`patience` for a daemon it has reached, re-sends only what the declaration marks safe, and gives up
with a ConnectionError naming the daemon and how long it waited."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from client import AsyncLuxiClient, AsyncWConfdClient, LuxiClient, WConfdClient, errors

pytestmark = pytest.mark.timeout(60)


@contextlib.contextmanager
def serving(path: Path, handle: Callable[[socket.socket], None]) -> Iterator[None]:
    """Listen on `path` and give each accepted connection to `handle`, one at a time, on a
    thread (a stand-in daemon); stops when the block ends."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    server.settimeout(0.1)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                handle(conn)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)
        server.close()


@contextlib.contextmanager
def hang_up_server(path: Path) -> Iterator[list[bytes]]:
    """A socket that takes each request line and closes the connection unanswered (what a
    daemon killed mid-call looks like); yields the requests it received."""
    received: list[bytes] = []

    def handle(conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        with contextlib.suppress(OSError):
            while not data.endswith(b"\n"):
                chunk = conn.recv(65536)
                if not chunk:
                    break
                data += chunk
        if data:
            received.append(data)

    with serving(path, handle):
        yield received


@contextlib.contextmanager
def hang_up_after_identify_server(path: Path) -> Iterator[list[str]]:
    """A wconfd stand-in whose first connection answers `identify` and hangs up at once
    (a daemon killed or stepping down right then); later ones answer every call (with an
    empty list).  Yields the methods it answered, in order."""
    answered: list[str] = []

    def handle(conn: socket.socket) -> None:
        first = not answered
        with conn.makefile("rb") as lines:
            for line in lines:
                request = json.loads(line)
                result = {"client_id": "c"} if request["method"] == "identify" else []
                answer = {"jsonrpc": "2.0", "result": result, "id": request["id"]}
                conn.sendall(json.dumps(answer).encode() + b"\n")
                answered.append(request["method"])
                if first:
                    break

    with serving(path, handle):
        yield answered


def test_an_async_call_rides_out_a_hang_up_right_after_identify(tmp_path):
    """The async stub used to fail an assertion (and so kill a waiting job process)
    when the daemon closed a fresh connection right after answering identify."""

    async def call() -> list[list[str]]:
        wc = AsyncWConfdClient(tmp_path / "wconfd.sock", name="w", patience=10)
        try:
            return await wc.list_locks()
        finally:
            await wc.close()

    with hang_up_after_identify_server(tmp_path / "wconfd.sock") as answered:
        assert asyncio.run(call()) == []
    assert answered == ["identify", "identify", "list_locks"]


def test_a_call_that_may_have_been_applied_is_not_sent_again(tmp_path):
    path = tmp_path / "luxid.sock"
    with hang_up_server(path) as received:
        lc = LuxiClient(path, patience=30)
        started = time.monotonic()
        with pytest.raises(errors.ConnectionError, match="may or may not have been applied"):
            lc.submit_job(ops=[{"OP_ID": "OP_TEST_DELAY", "duration": 0}])
        assert time.monotonic() - started < 5
        assert len(received) == 1


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_a_safe_call_is_resent_until_the_patience_runs_out(tmp_path, kind):
    path = tmp_path / "luxid.sock"
    with hang_up_server(path) as received:
        started = time.monotonic()
        with pytest.raises(errors.ConnectionError) as info:
            if kind == "sync":
                LuxiClient(path, patience=1.0).query_queue_info()
            else:

                async def call() -> None:
                    lc = AsyncLuxiClient(path, patience=1.0)
                    try:
                        await lc.query_queue_info()
                    finally:
                        await lc.close()

                asyncio.run(call())
        waited = time.monotonic() - started
    assert 1.0 <= waited < 10
    assert len(received) > 1  # re-sent on every new connection
    assert "luxid" in info.value.message and "after waiting 1 s" in info.value.message
    assert info.value.data["daemon"] == "luxid" and info.value.data["waited"] >= 1.0


def test_a_first_connection_fails_at_once_unless_the_daemon_is_expected(tmp_path):
    started = time.monotonic()
    with pytest.raises(errors.ConnectionError, match="is it running"):
        WConfdClient(tmp_path / "none.sock", patience=30).ping()
    assert time.monotonic() - started < 2
    started = time.monotonic()
    with pytest.raises(errors.ConnectionError, match="after waiting"):
        WConfdClient(tmp_path / "none.sock", patience=0.5, expect_daemon=True).ping()
    assert time.monotonic() - started >= 0.5


def test_a_restart_within_the_patience_is_ridden_out_with_locks_restored(daemon_factory):
    wconfd = daemon_factory("wconfd").start()
    wc = WConfdClient(wconfd.socket, name="patient", patience=30)
    assert wc.try_update_locks([["node/a", "exclusive"]]) == []
    wconfd.kill()
    restart = threading.Timer(1.0, wconfd.start)
    restart.start()
    try:
        assert wc.list_locks() == [["node/a", "exclusive"]]  # re-identified, lock restored
        wc.free_locks()
        assert wc.list_locks() == []
    finally:
        restart.join()
