"""Helpers of the luxid failover tests (docs/contracts.md#replicated-control-plane): a control-plane
node whose wconfd election is played by an `etcd_testlib.Candidate` (so a test can kill or freeze
it), with a wconfd on local files (all luxid needs of it here) and a luxid on etcd.
"""

from __future__ import annotations

import contextlib
import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
from etcd_testlib import Candidate, EtcdCluster, require_etcd
from luxid_testlib import Stack

from client import LuxiClient, errors

TTL = 3.0
FAILOVER_LIMIT = 5.0


class Node:
    """One control-plane node: an election candidate, a wconfd on local files, a luxid on
    etcd."""

    def __init__(self, factory: Any, tmp: Path, cluster: EtcdCluster, prefix: str, name: str):
        self.name = name
        root = tmp / name
        root.mkdir()
        hosts = ",".join(e.removeprefix("http://") for e in cluster.endpoints)
        self.wconfd = factory("wconfd", root=root).start()
        self.luxid = factory(
            "luxid", "--log-level", "DEBUG", "--store", f"etcd://{hosts}{prefix}",
            "--node", name, "--lease-ttl", str(TTL), root=root,
        ).start()  # fmt: skip
        self.candidate: Candidate | None = None
        self.endpoints, self.prefix = cluster.endpoints, prefix
        self.lc = LuxiClient(self.luxid.socket, timeout=30)

    def campaign(self) -> Candidate:
        self.candidate = Candidate(self.endpoints, self.prefix, self.name, TTL)
        return self.candidate

    def serving(self) -> bool:
        try:
            self.lc.query_queue_info()
        except errors.NotMaster:
            return False
        return True

    def wait_serving(self, timeout: float) -> float:
        """Seconds until this node's luxid answers as master."""
        start = time.monotonic()
        while not self.serving():
            assert time.monotonic() - start < timeout, (
                f"{self.name} does not serve:\n{self.luxid.log()}"
            )
            time.sleep(0.02)
        return time.monotonic() - start

    def die(self) -> None:
        """The node's host dies: kill -9 of its election, its luxid and its job processes
        (wconfd stays: here it only serves this node's job processes their locks)."""
        jobs = psutil.Process(self.luxid.pid).children(recursive=True)
        assert self.candidate is not None
        self.candidate.signal(signal.SIGKILL)
        self.luxid.kill()
        for proc in jobs:
            with contextlib.suppress(psutil.NoSuchProcess):
                proc.kill()
        self.candidate.close()
        self.candidate = None
        self.lc.close()

    def revive(self) -> None:
        """The node comes back: its luxid starts (as a standby) and it campaigns again."""
        self.luxid.start()
        self.lc = LuxiClient(self.luxid.socket, timeout=30)
        self.campaign()

    def close(self) -> None:
        self.lc.close()
        if self.candidate is not None:
            self.candidate.close()


@contextlib.contextmanager
def node_pair(factory: Any, tmp: Path, cluster: EtcdCluster) -> Iterator[list[Node]]:
    """Two nodes, node1 and node2, on a fresh key prefix of `cluster`; closed after."""
    prefix = f"/t/{uuid.uuid4().hex}"
    made = [Node(factory, tmp, cluster, prefix, f"node{i}") for i in (1, 2)]
    try:
        yield made
    finally:
        for node in made:
            node.close()


def rows(lc: LuxiClient, ids: list[int], *fields: str) -> dict[int, list[Any]]:
    return {r[0]: r[1:] for r in lc.query_jobs(ids=ids, fields=["id", *fields]) if r is not None}


class EtcdStack(Stack):
    """luxid_testlib's Stack with luxid on etcd as the master node `node1` (a Candidate
    holds the leader key for it), so luxid's own tests run on both stores. A start of
    luxid returns once it serves as master (it stands by for a moment while it loads)."""

    def __init__(self, factory: Any, endpoints: list[str], *luxid_args: str) -> None:
        prefix = f"/t/{uuid.uuid4().hex}"
        self.candidate = Candidate(endpoints, prefix, "node1", TTL)
        self.candidate.wait_for("elected", 15)
        hosts = ",".join(e.removeprefix("http://") for e in endpoints)

        def made(name: str, *args: str, **kwargs: Any) -> Any:
            daemon = factory(name, *args, **kwargs)
            if name == "luxid":
                plain = daemon.wait_ready

                def wait_ready(timeout: float = 20.0) -> None:
                    plain(timeout)
                    deadline = time.monotonic() + timeout
                    with LuxiClient(daemon.socket, timeout=timeout) as lc:
                        while True:
                            try:
                                lc.query_queue_info()
                                return
                            except errors.NotMaster:
                                assert time.monotonic() < deadline, daemon.log()
                                time.sleep(0.01)

                daemon.wait_ready = wait_ready
            return daemon

        store = ("--store", f"etcd://{hosts}{prefix}", "--node", "node1")
        super().__init__(made, *store, *luxid_args)

    def close(self) -> None:
        super().close()
        self.candidate.close()


def make_stack(request: Any, factory: Any, *luxid_args: str) -> Stack:
    """A Stack on the store the test is parametrised with ("local" or "etcd")."""
    if request.param == "local":
        return Stack(factory, *luxid_args)
    require_etcd()
    cluster = request.getfixturevalue("etcd_cluster")
    return EtcdStack(factory, cluster.endpoints, *luxid_args)
