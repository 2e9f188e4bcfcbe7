"""sd_notify client: exact datagrams, watchdog parsing, and never raising into the daemon."""

from __future__ import annotations

import asyncio
import logging
import os
import socket
import sys
import tempfile
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from client._server import sdnotify

pytestmark = pytest.mark.skipif(not hasattr(socket, "AF_UNIX"), reason="needs AF_UNIX sockets")


def _recv(sock: socket.socket) -> bytes:
    sock.settimeout(2.0)
    return sock.recv(65536)


def _assert_nothing_pending(sock: socket.socket) -> None:
    sock.setblocking(False)
    with pytest.raises(BlockingIOError):
        sock.recv(65536)
    sock.setblocking(True)


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    for name in sdnotify.NOTIFY_ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    return monkeypatch


@pytest.fixture
def path_socket(clean_env: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A datagram socket bound to a filesystem path, named in NOTIFY_SOCKET."""
    # A short directory: AF_UNIX paths are limited to ~107 bytes, pytest's tmp_path may not be.
    with tempfile.TemporaryDirectory(prefix="lwsd") as tmp:
        path = os.path.join(tmp, "notify")
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.bind(path)
            clean_env.setenv("NOTIFY_SOCKET", path)
            yield sock


@pytest.fixture
def abstract_socket(clean_env: pytest.MonkeyPatch) -> Iterator[socket.socket]:
    """A datagram socket in the Linux abstract namespace, named "@..." in NOTIFY_SOCKET."""
    if not sys.platform.startswith("linux"):
        pytest.skip("abstract AF_UNIX sockets are Linux-only")
    name = f"lockwarden-test-{uuid.uuid4().hex}"
    with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
        sock.bind(b"\0" + name.encode())
        clean_env.setenv("NOTIFY_SOCKET", "@" + name)
        yield sock


# --- datagrams ------------------------------------------------------------------------------


def test_ready_sends_ready(path_socket: socket.socket) -> None:
    assert sdnotify.ready() is True
    assert _recv(path_socket) == b"READY=1"


def test_ready_with_status(path_socket: socket.socket) -> None:
    assert sdnotify.ready("serving on /run/lockwarden/wconfd.sock") is True
    assert _recv(path_socket) == b"READY=1\nSTATUS=serving on /run/lockwarden/wconfd.sock"


def test_status(path_socket: socket.socket) -> None:
    assert sdnotify.status("3 jobs running") is True
    assert _recv(path_socket) == b"STATUS=3 jobs running"


def test_status_is_utf8(path_socket: socket.socket) -> None:
    assert sdnotify.status("naïve ✓") is True
    assert _recv(path_socket) == "STATUS=naïve ✓".encode()


def test_stopping(path_socket: socket.socket) -> None:
    assert sdnotify.stopping() is True
    assert _recv(path_socket) == b"STOPPING=1"


def test_notify_joins_lines_in_one_datagram(path_socket: socket.socket) -> None:
    assert sdnotify.notify("RELOADING=1", "STATUS=reloading") is True
    assert _recv(path_socket) == b"RELOADING=1\nSTATUS=reloading"
    _assert_nothing_pending(path_socket)


def test_newlines_cannot_inject_assignments(path_socket: socket.socket) -> None:
    assert sdnotify.status("failed:\nMAINPID=1\r\nREADY=1") is True
    assert _recv(path_socket) == b"STATUS=failed: MAINPID=1  READY=1"


def test_notify_without_lines_sends_nothing(path_socket: socket.socket) -> None:
    assert sdnotify.notify() is False
    _assert_nothing_pending(path_socket)


def test_abstract_socket(abstract_socket: socket.socket) -> None:
    assert sdnotify.ready("up") is True
    assert _recv(abstract_socket) == b"READY=1\nSTATUS=up"
    assert sdnotify.stopping() is True
    assert _recv(abstract_socket) == b"STOPPING=1"


# --- no socket / broken socket --------------------------------------------------------------


def test_unset_socket_is_a_noop(clean_env: pytest.MonkeyPatch) -> None:
    assert sdnotify.notify("READY=1") is False
    assert sdnotify.ready("x") is False
    assert sdnotify.status("x") is False
    assert sdnotify.stopping() is False


def test_empty_socket_is_a_noop(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("NOTIFY_SOCKET", "")
    assert sdnotify.ready() is False


def test_relative_socket_path_is_refused(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("NOTIFY_SOCKET", "relative/notify")
    assert sdnotify.ready() is False


def test_removed_socket_never_raises(
    path_socket: socket.socket, caplog: pytest.LogCaptureFixture
) -> None:
    path = os.environ["NOTIFY_SOCKET"]
    os.unlink(path)
    with caplog.at_level(logging.DEBUG, logger=sdnotify.__name__):
        assert sdnotify.ready("x") is False
        assert sdnotify.status("x") is False
        assert sdnotify.stopping() is False
        assert sdnotify.notify("WATCHDOG=1") is False
    assert any("failed" in r.getMessage() for r in caplog.records)
    assert all(r.levelno == logging.DEBUG for r in caplog.records)


def test_socket_path_that_is_not_a_socket_never_raises(
    clean_env: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    regular = tmp_path / "file"
    regular.write_text("")
    clean_env.setenv("NOTIFY_SOCKET", str(regular))
    assert sdnotify.ready() is False
    clean_env.setenv("NOTIFY_SOCKET", str(tmp_path / "missing-dir" / "notify"))
    assert sdnotify.ready() is False


def test_unbound_abstract_socket_never_raises(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("NOTIFY_SOCKET", f"@lockwarden-test-nobody-{uuid.uuid4().hex}")
    assert sdnotify.ready() is False


def test_stream_socket_never_raises(clean_env: pytest.MonkeyPatch) -> None:
    # A SOCK_STREAM listener at the path: sendto on a datagram socket fails (EPROTOTYPE).
    with tempfile.TemporaryDirectory(prefix="lwsd") as tmp:
        path = os.path.join(tmp, "stream")
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(path)
            sock.listen()
            clean_env.setenv("NOTIFY_SOCKET", path)
            assert sdnotify.ready() is False


# --- watchdog interval ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("usec", "expected"),
    [
        ("30000000", 30.0),
        ("1500000", 1.5),
        ("1", 0.000001),
        ("0", None),
        ("-5", None),
        ("", None),
        ("abc", None),
        ("1.5", None),
    ],
)
def test_watchdog_interval_parsing(
    clean_env: pytest.MonkeyPatch, usec: str, expected: float | None
) -> None:
    clean_env.setenv("WATCHDOG_USEC", usec)
    assert sdnotify.watchdog_interval() == expected


def test_watchdog_interval_unset(clean_env: pytest.MonkeyPatch) -> None:
    assert sdnotify.watchdog_interval() is None


def test_watchdog_pid_must_be_ours(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("WATCHDOG_USEC", "30000000")
    clean_env.setenv("WATCHDOG_PID", str(os.getpid()))
    assert sdnotify.watchdog_interval() == 30.0
    clean_env.setenv("WATCHDOG_PID", str(os.getpid() + 1))
    assert sdnotify.watchdog_interval() is None
    clean_env.setenv("WATCHDOG_PID", "not-a-pid")
    assert sdnotify.watchdog_interval() is None
    clean_env.setenv("WATCHDOG_PID", "")
    assert sdnotify.watchdog_interval() == 30.0


# --- watchdog loop --------------------------------------------------------------------------


def _drain(sock: socket.socket) -> list[bytes]:
    sock.setblocking(False)
    out: list[bytes] = []
    while True:
        try:
            out.append(sock.recv(65536))
        except BlockingIOError:
            break
    sock.setblocking(True)
    return out


async def _run_for(seconds: float, task: asyncio.Task[None]) -> None:
    """Let ``task`` run for ``seconds``, then cancel it and check it ended by cancellation."""
    await asyncio.sleep(seconds)
    assert not task.done(), "the watchdog loop ended on its own"
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task


def test_watchdog_loop_pings_at_half_interval(
    path_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "100000")  # 0.1 s: a ping every 0.05 s

    async def main() -> None:
        await _run_for(0.32, asyncio.create_task(sdnotify.watchdog_loop()))

    asyncio.run(main())
    pings = _drain(path_socket)
    assert set(pings) == {b"WATCHDOG=1"}
    # First ping at once, then every 0.05 s: about 7 in 0.32 s; allow for a slow machine.
    assert 3 <= len(pings) <= 8


def test_watchdog_loop_withholds_pings_while_unhealthy(
    path_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "100000")
    healthy = False
    checks = 0

    def is_healthy() -> bool:
        nonlocal checks
        checks += 1
        return healthy

    async def main() -> None:
        nonlocal healthy
        task = asyncio.create_task(sdnotify.watchdog_loop(is_healthy))
        await asyncio.sleep(0.17)
        assert _drain(path_socket) == []
        healthy = True
        await _run_for(0.17, task)

    asyncio.run(main())
    assert checks >= 4
    pings = _drain(path_socket)
    assert pings and set(pings) == {b"WATCHDOG=1"}


def test_watchdog_loop_treats_a_raising_check_as_unhealthy(
    path_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "100000")

    def is_healthy() -> bool:
        raise RuntimeError("boom")

    async def main() -> None:
        await _run_for(0.12, asyncio.create_task(sdnotify.watchdog_loop(is_healthy)))

    asyncio.run(main())
    assert _drain(path_socket) == []


def test_watchdog_loop_returns_without_watchdog(path_socket: socket.socket) -> None:
    async def main() -> None:
        await asyncio.wait_for(sdnotify.watchdog_loop(), timeout=1.0)

    asyncio.run(main())
    assert _drain(path_socket) == []


def test_watchdog_loop_returns_for_another_pid(
    path_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "100000")
    monkeypatch.setenv("WATCHDOG_PID", str(os.getpid() + 1))

    async def main() -> None:
        await asyncio.wait_for(sdnotify.watchdog_loop(), timeout=1.0)

    asyncio.run(main())
    assert _drain(path_socket) == []


def test_watchdog_loop_survives_socket_removal(
    path_socket: socket.socket, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHDOG_USEC", "100000")
    os.unlink(os.environ["NOTIFY_SOCKET"])

    async def main() -> None:
        task = asyncio.create_task(sdnotify.watchdog_loop())
        await asyncio.sleep(0.12)
        assert not task.done()  # still looping, did not raise
        await _run_for(0.0, task)

    asyncio.run(main())


# --- child environment ----------------------------------------------------------------------


def test_child_environment_strips_notify_vars() -> None:
    env = {
        "NOTIFY_SOCKET": "/run/systemd/notify",
        "WATCHDOG_USEC": "30000000",
        "WATCHDOG_PID": "1",
        "LW_RUN_DIR": "/run/lockwarden",
        "PATH": "/usr/bin",
    }
    assert sdnotify.child_environment(env) == {"LW_RUN_DIR": "/run/lockwarden", "PATH": "/usr/bin"}
    assert env["NOTIFY_SOCKET"] == "/run/systemd/notify"  # the input is not modified


def test_child_environment_defaults_to_os_environ(clean_env: pytest.MonkeyPatch) -> None:
    clean_env.setenv("NOTIFY_SOCKET", "/run/systemd/notify")
    clean_env.setenv("LW_TEST_MARKER", "1")
    env = sdnotify.child_environment()
    assert "NOTIFY_SOCKET" not in env
    assert env["LW_TEST_MARKER"] == "1"
