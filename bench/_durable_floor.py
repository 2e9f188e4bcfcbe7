"""The floor lock rule 7 (durable before the answer, docs/contracts.md#lock-rules) leaves on this
machine for lock cycles: a bare durable lock server, measured by bench/locks.py in the same run as
wconfd.

It does only what rule 7 asks of every lock change and nothing else a real lock service
does: a line `A <lock>` acquires (waiting first-come first-served while another holds
it), `R <lock>` releases and hands the lock to the next waiter; every change is written
with one RWF_DSYNC write into preallocated space (group commit: one write per event-loop
round, as wconfd's journal) before its `ok` is sent.  No JSON, no validation, no client
identification, no fairness or deadlock checks, no snapshot, no metrics.  Its rate,
with the same client loops as wconfd's figures, is what any server that honours rule 7
can at most reach here: transport, wake-ups and the disk flush.

The same server also answers the wire format of docs/contracts.md#wire-protocol, a JSON-RPC 2.0
`try_update_locks` line (decoded and answered with msgspec, journalled as it came), for the
one-client loop of `JsonRpcLockClient` (a stub reduced to encode, send, receive, decode): the floor
of a server that honours rule 7 and speaks the documented protocol, and nothing more.

Run as `python bench/_durable_floor.py SOCKET JOURNAL`; it prints `ready` once it listens.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol, cast

import msgspec

_JOURNAL_BYTES = 1 << 22  # preallocated; records wrap around in the first half


class BareLockClient:
    """A blocking client of the bare server: one call at a time, like a sync stub."""

    def __init__(self, path: str | Path) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.connect(str(path))

    def _call(self, line: bytes) -> None:
        self._sock.sendall(line)
        answer = self._sock.recv(64)
        while not answer.endswith(b"\n"):
            answer += self._sock.recv(64)

    def acquire(self, lock: str) -> None:
        """Take `lock` exclusively, waiting while another client holds it."""
        self._call(b"A " + lock.encode() + b"\n")

    def release(self, lock: str) -> None:
        """Release `lock` (the next waiter gets it in the same durable write)."""
        self._call(b"R " + lock.encode() + b"\n")

    def close(self) -> None:
        self._sock.close()


class JsonRpcLockClient(BareLockClient):
    """A blocking JSON-RPC 2.0 client of the bare server: what a stub must at least do
    for `try_update_locks` (encode the request, decode the answer), and nothing else."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self._id = 0
        self._buffer = b""

    def _rpc(self, lock: str, mode: str) -> Any:
        self._id += 1
        request = {"jsonrpc": "2.0", "method": "try_update_locks", "id": self._id}
        request["params"] = {"request": [[lock, mode]]}
        self._sock.sendall(msgspec.json.encode(request) + b"\n")
        while b"\n" not in self._buffer:
            self._buffer += self._sock.recv(4096)
        line, _, self._buffer = self._buffer.partition(b"\n")
        answer = msgspec.json.decode(line)
        assert answer["id"] == self._id, answer
        return answer["result"]

    def acquire(self, lock: str) -> None:
        """Take `lock` exclusively (no waiting: the one-client loop never contends)."""
        self._rpc(lock, "exclusive")

    def release(self, lock: str) -> None:
        self._rpc(lock, "release")


class LockLoopClient(Protocol):
    """What the one-client loop drives: a blocking acquire and release of one lock."""

    def acquire(self, lock: str) -> None: ...
    def release(self, lock: str) -> None: ...


def cycles_per_s(client: LockLoopClient, seconds: float) -> float:
    """Acquire+release cycles per second on distinct locks: the one-client loop of
    bench/locks.py, for wconfd's stub and for the bare server's clients alike."""
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        lock = f"node/n{count % 1000:04d}"
        client.acquire(lock)
        client.release(lock)
        count += 1
    return count / (time.perf_counter() - start)


@contextlib.contextmanager
def bare_server() -> Iterator[Path]:
    """Run the bare durable lock server on a temporary socket and journal (on the same
    disk as the benches' state directories); yields its socket path."""
    with tempfile.TemporaryDirectory(prefix="lwbench-floor-") as tmp:
        path = Path(tmp) / "floor.sock"
        proc = subprocess.Popen(
            [sys.executable, __file__, str(path), str(Path(tmp) / "floor.journal")],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
            yield path
        finally:
            proc.terminate()
            proc.wait(10)


class _Server:
    """The lock table, the waiters and the group-committed journal of the bare server."""

    def __init__(self, fd: int, loop: asyncio.AbstractEventLoop) -> None:
        self.fd = fd
        self.loop = loop
        self.pos = 0
        self.pending: list[tuple[asyncio.Transport, bytes, bytes]] = []
        self.holder: dict[bytes, asyncio.Transport] = {}
        self.waiters: dict[bytes, collections.deque[asyncio.Transport]] = collections.defaultdict(
            collections.deque
        )

    def durable(self, transport: asyncio.Transport, record: bytes, answer: bytes = b"ok\n") -> None:
        """Queue `record`; `transport` gets `answer` once the round's write is on disk."""
        if not self.pending:
            self.loop.call_soon(self.flush)
        self.pending.append((transport, record, answer))

    def flush(self) -> None:
        batch, self.pending = self.pending, []
        data = b"".join(record for _, record, _ in batch)
        os.pwritev(self.fd, [data], self.pos, os.RWF_DSYNC)
        self.pos = (self.pos + len(data)) % (_JOURNAL_BYTES // 2)
        for transport, _, answer in batch:
            transport.write(answer)

    def handle_json(self, transport: asyncio.Transport, line: bytes) -> None:
        """A JSON-RPC `try_update_locks` of one uncontended pair: journal, then `[]`."""
        request = msgspec.json.decode(line)
        answer = {"jsonrpc": "2.0", "result": [], "id": request["id"]}
        self.durable(transport, line + b"\n", msgspec.json.encode(answer) + b"\n")

    def handle(self, transport: asyncio.Transport, line: bytes) -> None:
        if line.startswith(b"{"):
            return self.handle_json(transport, line)
        op, lock = line.split(b" ", 1)
        if op == b"A":
            if lock in self.holder:
                self.waiters[lock].append(transport)
            else:
                self.holder[lock] = transport
                self.durable(transport, line + b"\n")
            return
        self.durable(transport, line + b"\n")
        queue = self.waiters.get(lock)
        if queue:
            self.holder[lock] = queue.popleft()
            self.durable(self.holder[lock], b"A " + lock + b"\n")
        else:
            del self.holder[lock]


def _serve(path: str, journal: str) -> None:
    """Listen on `path` until terminated (on uvloop where installed, as the daemons)."""
    with contextlib.suppress(ImportError):
        import uvloop

        uvloop.install()
    fd = os.open(journal, os.O_RDWR | os.O_CREAT)
    os.pwrite(fd, bytes(_JOURNAL_BYTES), 0)
    os.fsync(fd)
    loop = asyncio.new_event_loop()
    server = _Server(fd, loop)

    class Connection(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            self.transport = cast(asyncio.Transport, transport)  # uvloop's is no subclass
            self.buffer = b""

        def data_received(self, data: bytes) -> None:
            *lines, self.buffer = (self.buffer + data).split(b"\n")
            for line in lines:
                server.handle(self.transport, line)

    loop.run_until_complete(loop.create_unix_server(Connection, path))
    print("ready", flush=True)
    loop.run_forever()


if __name__ == "__main__":
    _serve(sys.argv[1], sys.argv[2])
