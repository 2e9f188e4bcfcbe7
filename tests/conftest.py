"""Shared fixtures: real daemons on temporary directories, reached through their sockets.

`--store etcd` (default `local`) runs every wconfd and luxid the suite starts through
`daemon_factory` on the session's real three-member etcd cluster instead of local files
(docs/contracts.md#replicated-control-plane), each run/state directory pair under a key prefix of
its own as node `node1`; a start returns once the daemon serves as master, so the tests themselves
do not change. Tests about the local files themselves carry `@pytest.mark.local_store(reason)` and
skip there, saying why.
"""

from __future__ import annotations

import contextlib
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

BIN = Path(sys.executable).parent
INTEGRATION = Path(__file__).parent / "integration"
# Under --store etcd every daemon of one run/state directory pair is this control-plane node.
NODE = "node1"
# The store-parametrised fixtures' (wconfd, make_stack's) explicit etcd variant; see
# pytest_collection_modifyitems.
ETCD_PARAM = "etcd"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--store",
        choices=("local", "etcd"),
        default="local",
        help="where the wconfd and luxid the tests start keep their state: local files "
        "(default) or the session's three-member etcd cluster",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under --store etcd: skip the local-store tests (their reason given) and the explicit
    etcd variants of store-parametrised tests (the default run ran them, and their default
    variant now runs on etcd too)."""
    if config.getoption("--store") != "etcd":
        return
    for item in items:
        marker = item.get_closest_marker("local_store")
        if marker is not None:
            item.add_marker(pytest.mark.skip(reason=f"local store only: {_reason(marker)}"))
            continue
        params = getattr(getattr(item, "callspec", None), "params", {})
        if ETCD_PARAM in params.values():
            item.add_marker(
                pytest.mark.skip(
                    reason="the explicit etcd variant runs in the default run; under "
                    "--store etcd its default variant is on etcd as well"
                )
            )


def _reason(marker: pytest.Mark) -> str:
    return str(marker.args[0] if marker.args else marker.kwargs["reason"])


class EtcdPlacement:
    """Where the daemons of one run/state directory pair keep their state under --store
    etcd: one key prefix of their own, node NODE. luxid serves only while its node holds
    the leader key, normally through its wconfd; while no wconfd of the pair
    runs, an election candidate process (etcd_testlib.Candidate) holds it for the node, as
    a wconfd would, so a luxid started alone serves too."""

    def __init__(self, endpoints: list[str], prefix: str) -> None:
        self.endpoints = endpoints
        self.prefix = prefix
        self.url = "etcd://" + ",".join(e.removeprefix("http://") for e in endpoints) + prefix
        self.daemons: list[DaemonProcess] = []
        self.candidate: Any = None

    def args(self) -> tuple[str, ...]:
        return ("--store", self.url, "--node", NODE)

    def before_start(self, daemon: DaemonProcess) -> None:
        """A wconfd takes the leader key itself (revoking a stand-in's lease, which names
        its node); a luxid without a running wconfd gets a stand-in."""
        if daemon.name == "wconfd":
            self.close()
        elif not any(d.name == "wconfd" and d.running for d in self.daemons):
            self.stand_in()

    def stand_in(self) -> None:
        if self.candidate is None or self.candidate.proc.poll() is not None:
            from etcd_testlib import Candidate

            self.candidate = Candidate(self.endpoints, self.prefix, NODE)
            self.candidate.wait_for("elected", 15)

    def close(self) -> None:
        if self.candidate is not None:
            self.candidate.close()
            self.candidate = None


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
        # Set (by daemon_factory under --store etcd) for a wconfd or luxid on etcd.
        self.placement: EtcdPlacement | None = None

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def start(self, *more: str, wait: bool = True) -> DaemonProcess:
        """Start the daemon and (by default) wait until it accepts connections (and, on
        etcd, serves as master)."""
        store: tuple[str, ...] = ()
        if self.placement is not None:
            self.placement.before_start(self)
            store = self.placement.args()
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [
                str(BIN / f"lw-{self.name}"),
                "--run-dir",
                str(self.run_dir),
                "--state-dir",
                str(self.state_dir),
                *self.extra,
                *store,
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
        """Block until the socket accepts a connection (and, on etcd, get_role says
        master)."""
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lw-{self.name} exited {self.proc.returncode}:\n{self.log()}")
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(self.socket))
                if self.placement is None or self._serves_as_master():
                    return
            time.sleep(0.02)
        raise TimeoutError(f"lw-{self.name} did not come up:\n{self.log()}")

    def _serves_as_master(self) -> bool:
        from client import LuxiClient, WConfdClient, errors

        make = WConfdClient if self.name == "wconfd" else LuxiClient
        try:
            with make(self.socket, timeout=5) as client:
                return client.get_role().role == "master"
        except errors.RpcError:
            return False

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
def daemon_factory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[type[DaemonProcess]]:
    """Make DaemonProcess objects under tmp_path; all are stopped at the end. Under
    --store etcd a wconfd or luxid (unless given its own --store) goes on etcd, with the
    placement of its run/state directories (so a restart finds its state again)."""
    made: list[DaemonProcess] = []
    placements: dict[Path, EtcdPlacement] = {}
    on_etcd = request.config.getoption("--store") == "etcd"

    def placement(root: Path) -> EtcdPlacement:
        if root not in placements:
            cluster = request.getfixturevalue("etcd_cluster")
            placements[root] = EtcdPlacement(cluster.endpoints, f"/t/{uuid.uuid4().hex[:12]}")
        return placements[root]

    class Factory(DaemonProcess):
        def __init__(self, name: str, *extra: str, root: Path | None = None) -> None:
            root = (root or tmp_path).resolve()
            super().__init__(name, root, *extra)
            if on_etcd and name in ("wconfd", "luxid") and "--store" not in extra:
                self.placement = placement(root)
                self.placement.daemons.append(self)
            made.append(self)

    yield Factory
    for d in made:
        if d.running:
            d.stop()
    for p in placements.values():
        p.close()


@pytest.fixture(scope="session")
def etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One real three-member etcd cluster on loopback for the session (skips, saying why,
    where no etcd binary exists); tests keep apart by key prefix (`etcd_store_url`)."""
    sys.path.insert(0, str(INTEGRATION))
    from etcd_testlib import running_cluster

    with running_cluster(tmp_path_factory.mktemp("etcd")) as cluster:
        yield cluster


@pytest.fixture
def etcd_store_url(etcd_cluster: Any) -> str:
    """`--store etcd://…/PREFIX` with a prefix of this test's own."""
    hosts = ",".join(e.removeprefix("http://") for e in etcd_cluster.endpoints)
    return f"etcd://{hosts}/test-{uuid.uuid4().hex[:12]}"


@pytest.fixture(params=["local"])
def wconfd(request: pytest.FixtureRequest, daemon_factory: type[DaemonProcess]) -> DaemonProcess:
    """A running wconfd, on local files or (parametrise with "etcd", indirectly) as the
    master of one node on a real etcd cluster."""
    extra: tuple[str, ...] = ()
    if request.param == "etcd":
        url = request.getfixturevalue("etcd_store_url")
        extra = ("--store", url, "--node", "node1")
    return daemon_factory("wconfd", "--log-level", "DEBUG", *extra).start()


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
