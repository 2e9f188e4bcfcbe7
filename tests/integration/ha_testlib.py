"""Several wconfd nodes on one real etcd cluster, for the SPEC §13 tests and bench/ha.py.

Each node is a real `lw-wconfd --store etcd://… --node nodeN` on its own run and state
directories; helpers wait for roles through the nodes' sockets.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

from client import WConfdClient, errors

BIN = Path(sys.executable).parent


def store_url(endpoints: list[str], prefix: str) -> str:
    """`etcd://H:P,…/PREFIX` for the members' client URLs."""
    return "etcd://" + ",".join(e.removeprefix("http://") for e in endpoints) + prefix


class WconfdNode:
    """One control-plane node's wconfd."""

    def __init__(self, root: Path, node: str, url: str, *extra: str) -> None:
        self.node = node
        self.dir = root / node
        self.url = url
        self.extra = extra
        self.socket = self.dir / "run" / "wconfd.sock"
        self.log_path = self.dir / "wconfd.log"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> WconfdNode:
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [
                    str(BIN / "lw-wconfd"),
                    "--run-dir",
                    str(self.dir / "run"),
                    "--state-dir",
                    str(self.dir / "state"),
                    "--store",
                    self.url,
                    "--node",
                    self.node,
                    "--log-level",
                    "DEBUG",
                    *self.extra,
                ],
                stdout=log,
                stderr=log,
            )
        self.wait_socket()
        return self

    def wait_socket(self, timeout: float = 30.0) -> None:
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"wconfd {self.node} exited:\n{self.log()}")
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(self.socket))
                return
            time.sleep(0.02)
        raise TimeoutError(f"wconfd {self.node} did not come up:\n{self.log()}")

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def client(self, name: str = "test", timeout: float = 10.0) -> WConfdClient:
        return WConfdClient(self.socket, name=name, timeout=timeout)

    def role(self) -> dict[str, Any]:
        with self.client("role") as wc:
            return dict(msgspec.to_builtins(wc.get_role()))

    def signal(self, sig: int) -> None:
        assert self.proc is not None
        os.kill(self.proc.pid, sig)

    def kill(self) -> None:
        """kill -9, as a crashed host would."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


def wait_master(nodes: list[WconfdNode], timeout: float = 15.0) -> WconfdNode:
    """The node that serves as master, once exactly one does (others standby naming it)."""
    deadline = time.monotonic() + timeout
    last: dict[str, Any] = {}
    while time.monotonic() < deadline:
        roles = {}
        for n in nodes:
            with contextlib.suppress(errors.RpcError):
                roles[n.node] = n.role()
        last = roles
        masters = [n for n in nodes if roles.get(n.node, {}).get("role") == "master"]
        if len(masters) == 1:
            return masters[0]
        time.sleep(0.05)
    raise TimeoutError(f"no single master within {timeout} s: {last}")


def first_answer(node: WconfdNode, timeout: float) -> float:
    """Seconds until `node` answers an identified call as master (list_locks)."""
    t0 = time.monotonic()
    deadline = t0 + timeout
    while time.monotonic() < deadline:
        try:
            with node.client("probe", timeout=2.0) as wc:
                wc.list_locks()
            return time.monotonic() - t0
        except (errors.NotMaster, errors.ConnectionError, errors.StorageError):
            time.sleep(0.01)
    raise TimeoutError(f"{node.node} did not serve within {timeout} s:\n{node.log()[-3000:]}")
