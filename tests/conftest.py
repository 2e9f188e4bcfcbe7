"""Shared fixtures: real daemons on temporary directories, reached through their sockets."""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent


class DaemonProcess:
    """A running `lw-<name>` on its own run and state dirs."""

    def __init__(self, name: str, root: Path, *extra: str) -> None:
        self.name = name
        self.run_dir = root / "run"
        self.state_dir = root / "state"
        self.extra = extra
        self.socket = self.run_dir / f"{name}.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.log_path = root / f"{name}.log"

    def start(self, *more: str, wait: bool = True) -> DaemonProcess:
        """Start the daemon and (by default) wait until it accepts connections."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [
                str(BIN / f"lw-{self.name}"),
                "--run-dir",
                str(self.run_dir),
                "--state-dir",
                str(self.state_dir),
                *self.extra,
                *more,
            ],
            stdout=log,
            stderr=log,
        )
        log.close()
        if wait:
            self.wait_ready()
        return self

    def wait_ready(self, timeout: float = 20.0) -> None:
        """Block until the socket accepts a connection."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lw-{self.name} exited {self.proc.returncode}:\n{self.log()}")
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(self.socket))
                return
            time.sleep(0.02)
        raise TimeoutError(f"lw-{self.name} did not come up:\n{self.log()}")

    def log(self) -> str:
        """Everything the daemon wrote to stderr so far."""
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Send `sig` and wait for the exit code."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(5)

    def kill(self) -> None:
        """kill -9, as a crash would."""
        self.stop(signal.SIGKILL)

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid


@pytest.fixture
def daemon_factory(tmp_path: Path) -> Iterator[type[DaemonProcess]]:
    """Make DaemonProcess objects under tmp_path; all are stopped at the end."""
    made: list[DaemonProcess] = []

    class Factory(DaemonProcess):
        def __init__(self, name: str, *extra: str, root: Path | None = None) -> None:
            super().__init__(name, root or tmp_path, *extra)
            made.append(self)

    yield Factory
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            d.stop()


@pytest.fixture(scope="session")
def etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real three-member etcd cluster on loopback for the session (skips, saying why,
    where no etcd binary exists); tests keep apart by key prefix (`etcd_store_url`)."""
    sys.path.insert(0, str(Path(__file__).parent / "integration"))
    from etcd_testlib import running_cluster

    with running_cluster(tmp_path_factory.mktemp("etcd")) as cluster:
        yield cluster


@pytest.fixture
def wconfd(daemon_factory: type[DaemonProcess]) -> DaemonProcess:
    """A running wconfd."""
    return daemon_factory("wconfd", "--log-level", "DEBUG").start()


@pytest.fixture
def luxid(daemon_factory: type[DaemonProcess]) -> DaemonProcess:
    """A running luxid."""
    return daemon_factory("luxid", "--log-level", "DEBUG").start()


class RawConnection:
    """A plain socket speaking newline-framed bytes, for protocol-level tests."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(str(path))
        self.buf = b""

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def line(self) -> bytes:
        """The next line the daemon sent (without the newline)."""
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("closed")
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def call(self, data: bytes) -> object:
        """Send one frame, return the decoded answer."""
        import json

        self.send(data)
        return json.loads(self.line())

    def closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True once the daemon has closed this connection."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
        except (TimeoutError, ConnectionResetError):
            return False

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def raw_factory() -> Iterator[type[RawConnection]]:
    """Open RawConnections; all are closed at the end."""
    opened: list[RawConnection] = []

    class Factory(RawConnection):
        def __init__(self, path: Path) -> None:
            super().__init__(path)
            opened.append(self)

    yield Factory
    for conn in opened:
        conn.close()
