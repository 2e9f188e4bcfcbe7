"""Several wconfd nodes on one real etcd cluster, for the SPEC §13 tests and bench/ha.py.

Each node is a real `lw-wconfd --store etcd://… --node nodeN` on its own run and state
directories (the suite's DaemonProcess, from tests/conftest.py); helpers wait for roles
through the nodes' sockets.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for conftest
from conftest import DaemonProcess

from client import WConfdClient, errors


def store_url(endpoints: list[str], prefix: str) -> str:
    """`etcd://H:P,…/PREFIX` for the members' client URLs."""
    return "etcd://" + ",".join(e.removeprefix("http://") for e in endpoints) + prefix


class WconfdNode(DaemonProcess):
    """One control-plane node's wconfd (run and state dirs under `root/node`)."""

    def __init__(self, root: Path, node: str, url: str, *extra: str) -> None:
        super().__init__(
            "wconfd", root / node, "--store", url, "--node", node, "--log-level", "DEBUG", *extra
        )
        self.node = node

    def start(self, *more: str, wait: bool = True) -> WconfdNode:
        self.run_dir.parent.mkdir(parents=True, exist_ok=True)
        super().start(*more, wait=wait)
        return self

    def client(self, name: str = "test", timeout: float = 10.0) -> WConfdClient:
        return WConfdClient(self.socket, name=name, timeout=timeout)

    def role(self) -> dict[str, Any]:
        with self.client("role") as wc:
            return dict(msgspec.to_builtins(wc.get_role()))

    def send_signal(self, sig: int) -> None:
        os.kill(self.pid, sig)

    def stop(self, sig: int = signal.SIGTERM) -> int:
        """Stop it (continuing it first if it was SIGSTOPped); its exit code."""
        if self.proc is None:
            return 0
        with contextlib.suppress(ProcessLookupError):
            os.kill(self.proc.pid, signal.SIGCONT)
        return super().stop(sig)


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
