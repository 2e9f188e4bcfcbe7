"""Several wconfd nodes on one real etcd cluster, for the tests of the replicated
control plane (docs/contracts.md#replicated-control-plane) and bench/ha.py.

Each node is a real `lw-wconfd --store etcd://… --node nodeN` on its own run and state
directories (the suite's DaemonProcess, from tests/conftest.py); helpers wait for roles
through the nodes' sockets. `ControlNode` adds the node's luxid on the same run directory,
as `lw up --ha` runs them; `job_starts` reads what etcd holds of luxid's opcode starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for conftest
from conftest import DaemonProcess

from client import LuxiClient, WConfdClient, errors
from client._server.etcd.client import EtcdClient
from luxid.storage.etcd_keys import JobKeys, decode_job


def store_url(endpoints: list[str], prefix: str) -> str:
    """`etcd://H:P,…/PREFIX` for the members' client URLs."""
    return "etcd://" + ",".join(e.removeprefix("http://") for e in endpoints) + prefix


def etcd_keys(endpoints: list[str], prefix: bytes, action: str = "range", kvs: Any = ()) -> Any:
    """Read (`range`), delete (`delete`) or put back (`put`, `kvs`) the keys under `prefix`,
    as a member that lost them, or an operator restoring them, would."""

    async def run() -> Any:
        async with EtcdClient(endpoints) as client:
            if action == "range":
                return (await client.range(prefix, prefix=True)).kvs
            if action == "delete":
                return await client.delete(prefix, prefix=True)
            for kv in kvs:
                await client.put(kv.key, kv.value)
            return None

    return asyncio.run(run())


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


@contextlib.contextmanager
def wconfd_pair(root: Path, url: str) -> Iterator[list[WconfdNode]]:
    """node1 started first (so it is the master), then node2; both stopped after."""
    nodes = [WconfdNode(root, f"node{i}", url) for i in (1, 2)]
    try:
        nodes[0].start()
        wait_master(nodes[:1])
        nodes[1].start()
        yield nodes
    finally:
        for n in nodes:
            n.stop()


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


class ControlNode:
    """One control-plane node as `lw up --ha` runs it: a wconfd and a luxid on the same
    run directory (luxid and its job processes use this node's wconfd), both on etcd."""

    def __init__(self, root: Path, node: str, url: str) -> None:
        self.node = node
        self.wconfd = WconfdNode(root, node, url)
        self.luxid = DaemonProcess(
            "luxid", root / node, "--store", url, "--node", node, "--log-level", "DEBUG"
        )

    def start(self) -> ControlNode:
        self.wconfd.start()
        self.luxid.start()
        return self

    def die(self) -> set[int]:
        """The node's control plane dies: kill -9 of its wconfd, its luxid and every job
        process under luxid (found before the kill, so none escapes as an orphan); the
        pids of those job processes."""
        jobs = psutil.Process(self.luxid.pid).children(recursive=True)
        self.wconfd.kill()
        self.luxid.kill()
        for proc in jobs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        return {proc.pid for proc in jobs}

    def serving(self) -> bool:
        """Whether both daemons answer as master."""
        try:
            with self.wconfd.client("probe", timeout=2.0) as wc:
                wc.list_locks()
            with LuxiClient(self.luxid.socket, timeout=2.0) as lc:
                lc.query_queue_info()
        except (errors.NotMaster, errors.ConnectionError, errors.StorageError):
            return False
        return True

    def wait_serving(self, timeout: float) -> float:
        """Seconds until both daemons answer as master."""
        t0 = time.monotonic()
        while not self.serving():
            if time.monotonic() - t0 > timeout:
                raise TimeoutError(
                    f"{self.node} does not serve within {timeout} s:\n"
                    f"{self.wconfd.log()[-2000:]}\n{self.luxid.log()[-2000:]}"
                )
            time.sleep(0.02)
        return time.monotonic() - t0

    def stop(self) -> None:
        for daemon in (self.luxid, self.wconfd):
            if daemon.proc is not None:
                daemon.stop()


class JobStarts(msgspec.Struct, frozen=True):
    """What etcd says of luxid's opcodes: (job, opcode) → its durable start (opexec), and
    the opcode-running gates that exist."""

    exec_ts: dict[tuple[int, int], float]
    gates: frozenset[tuple[int, int]]


def job_starts(endpoints: list[str], prefix: str) -> JobStarts:
    """Read luxid's jobs (live and archived) and gates under `prefix` from etcd itself:
    what luxid shows may be ahead of its commit; a job process runs an opcode only once
    its start (and gate) is committed."""
    keys = JobKeys(prefix)

    async def read() -> JobStarts:
        exec_ts = {}
        async with EtcdClient(endpoints) as client:
            for root in (keys.live_prefix, keys.archive_prefix):
                for kv in (await client.range(root, prefix=True)).kvs:
                    for index, op in enumerate(decode_job(kv.key, kv.value).ops):
                        if op.exec_ts is not None:
                            exec_ts[(int(kv.key[len(root) :]), index)] = op.exec_ts
            found = (await client.range(keys.gate_prefix, prefix=True, keys_only=True)).kvs
        gates = frozenset(
            (int(job), int(op))
            for job, op in (kv.key[len(keys.gate_prefix) :].split(b"/") for kv in found)
        )
        return JobStarts(exec_ts, gates)

    return asyncio.run(read())
