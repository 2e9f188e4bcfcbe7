"""wconfd's configuration at 10 and at 10,000 instances (docs/contracts.md#performance-targets).

Two wconfds run side by side, one with a config of 10 instances and one with 10,000 (both
over 100 nodes), built through the socket by a pipelined AsyncWConfdClient holding
`instance/[lockset]` and `node/[lockset]` exclusively.  Then, alternating between the two
so machine noise hits both alike:

- `get_config` p50 through the stub (what a Python caller sees: wire + decoding 10,000
  instances into dicts) and on the raw socket (request to last byte: the daemon's and the
  transport's share), plus right after a write (the daemon re-encodes);
- `get_object` p50 (a random instance by name);
- `update_object` p50 at 10,000 vs at 10 (target ratio <= 1.5); each is durable (fsync);
- snapshot time at 10,000 (in-process, the daemon's own code: encode, format, atomic write,
  journal restart) and the part of it the daemon does on its event loop;
- restart time at 10,000: stop wconfd, start it again, time until it answers (it loads
  before it listens), with the journal it left (replay) and again from a fresh snapshot.

One JSON object on stdout.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

# This folder (first on sys.path) holds queue.py: put it last so the stdlib's queue wins;
# _util is still found here.
sys.path.append(sys.path.pop(0))

from _util import BIN, summary

from client import AsyncWConfdClient, WConfdClient
from client.api.wconfd import LockRequest

NODES = 100
SIZES = (10, 10_000)
IN_FLIGHT = 256
ROUNDS = 5
LOCKS: LockRequest = [("instance/[lockset]", "exclusive"), ("node/[lockset]", "exclusive")]


class Wconfd:
    """An `lw-wconfd` on `root`, restartable; start() returns seconds until it answers."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.socket = root / "run" / "wconfd.sock"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> float:
        t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            [
                str(BIN / "lw-wconfd"),
                "--run-dir",
                str(self.root / "run"),
                "--state-dir",
                str(self.root / "state"),
                "--log-level",
                "WARNING",
            ]
        )
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"lw-wconfd exited {self.proc.returncode}")
            with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
                sock.connect(str(self.socket))
                sock.sendall(b'{"jsonrpc":"2.0","method":"ping","id":1}\n')
                if sock.recv(100).endswith(b"\n"):
                    return time.perf_counter() - t0
            time.sleep(0.002)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(30)


def mac(i: int) -> str:
    """A distinct MAC per instance number."""
    return "aa:01:" + ":".join(f"{i >> shift & 255:02x}" for shift in (24, 16, 8, 0))


def instance(i: int) -> dict[str, Any]:
    """Instance number `i` as add_object takes it."""
    return {
        "name": f"inst{i}",
        "primary_node": f"node{i % NODES}",
        "secondary_nodes": [f"node{(i + 1) % NODES}"],
        "memory": 1024,
        "vcpus": 2,
        "disks": [{"size": 10240}],
        "nics": [{"mac": mac(i)}],
        "tags": ["bench"],
    }


async def build(path: Path, instances: int) -> float:
    """Add NODES nodes and `instances` instances, IN_FLIGHT calls at a time; seconds."""
    wc = AsyncWConfdClient(path, name="builder")
    assert await wc.try_update_locks(LOCKS) == []
    t0 = time.perf_counter()
    await asyncio.gather(*(wc.add_object("node", {"name": f"node{i}"}) for i in range(NODES)))
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def add(i: int) -> None:
        async with sem:
            await wc.add_object("instance", instance(i))

    await asyncio.gather(*(add(i) for i in range(instances)))
    elapsed = time.perf_counter() - t0
    await wc.free_locks()
    await wc.close()
    return elapsed


class RawConn:
    """A bare identified connection: times a request until the last byte of its answer."""

    def __init__(self, path: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX)
        self.sock.connect(str(path))
        pid = os.getpid()
        ident = {
            "jsonrpc": "2.0",
            "method": "identify",
            "id": 1,
            "params": {
                "job_id": None,
                "pid": pid,
                "start_time": psutil.Process(pid).create_time(),
                "name": "raw",
            },
        }
        self.call(json.dumps(ident).encode() + b"\n")

    def call(self, frame: bytes) -> int:
        self.sock.sendall(frame)
        size = 0
        while True:
            chunk = self.sock.recv(1 << 20)
            size += len(chunk)
            if chunk.endswith(b"\n"):
                return size

    def close(self) -> None:
        self.sock.close()


def timed(samples: list[float], call: Any, *args: Any) -> Any:
    t0 = time.perf_counter()
    result = call(*args)
    samples.append(time.perf_counter() - t0)
    return result


def measure(daemons: dict[int, Wconfd]) -> dict[int, dict[str, list[float]]]:
    """Every read and write figure, sample by sample alternating between the daemons."""
    rng = random.Random(1)
    clients = {n: WConfdClient(d.socket, name="bench") for n, d in daemons.items()}
    raws = {n: RawConn(d.socket) for n, d in daemons.items()}
    for wc in clients.values():
        assert wc.try_update_locks([("instance/[lockset]", "exclusive")]) == []
    samples: dict[int, dict[str, list[float]]] = {
        n: {k: [] for k in ("get_config", "raw", "after_write", "get_object", "update")}
        for n in daemons
    }
    get_config = b'{"jsonrpc":"2.0","method":"get_config","id":2}\n'
    for _ in range(ROUNDS):
        for _ in range(6):
            for n, wc in clients.items():
                timed(samples[n]["get_config"], wc.get_config)
                timed(samples[n]["raw"], raws[n].call, get_config)
        for _ in range(60):
            for n, wc in clients.items():
                timed(
                    samples[n]["get_object"], wc.get_object, "instance", f"inst{rng.randrange(n)}"
                )
        for i in range(60):
            for n, wc in clients.items():
                obj = wc.get_object("instance", f"inst{rng.randrange(n)}")
                obj["memory"] += 1
                timed(samples[n]["update"], wc.update_object, "instance", obj)
                if i % 20 == 0:  # the first get_config after a write re-encodes
                    timed(samples[n]["after_write"], raws[n].call, get_config)
    for wc in clients.values():
        wc.close()
    for raw in raws.values():
        raw.close()
    return samples


def load_and_snapshot(state_dir: Path) -> dict[str, Any]:
    """In-process: load the daemon's state (replay), then take a snapshot; timings."""
    from wconfd.durable_state import DurableState, Record, Snapshot
    from wconfd.storage.store import LocalStore

    store: LocalStore[Snapshot, Record] = LocalStore(
        state_dir,
        "wconfd",
        snapshot_type=Snapshot,
        record_type=Record,
    )
    t0 = time.perf_counter()
    loaded = store.open()
    journal_bytes = store.journal_bytes
    assert loaded.snapshot is not None
    state = DurableState.from_snapshot(loaded.snapshot)
    t1 = time.perf_counter()
    for record in loaded.records:
        state.apply(record)
    t2 = time.perf_counter()
    t3 = time.perf_counter()
    body = state.snapshot_json()
    encode_s = time.perf_counter() - t3
    store.snapshot_sync(body)
    snapshot_s = time.perf_counter() - t3
    size = os.path.getsize(store.snapshot_path)
    store.close()
    return {
        "replayed_records": len(loaded.records),
        "replayed_bytes": journal_bytes,
        "load_s": round(t2 - t0, 3),
        "load_snapshot_s": round(t1 - t0, 3),
        "replay_records_per_s": round(len(loaded.records) / max(t2 - t1, 1e-9)),
        "snapshot_s": round(snapshot_s, 3),
        "snapshot_loop_ms": round(encode_s * 1000, 1),
        "snapshot_bytes": size,
    }


@contextlib.contextmanager
def two_daemons() -> Iterator[dict[int, Wconfd]]:
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
        daemons = {n: Wconfd(Path(tmp) / f"c{n}") for n in SIZES}
        try:
            for d in daemons.values():
                d.start()
            yield daemons
        finally:
            for d in daemons.values():
                d.stop()


def main() -> None:
    with two_daemons() as daemons:
        build_s = {n: asyncio.run(build(d.socket, n)) for n, d in daemons.items()}
        samples = measure(daemons)
        # Restarts with the journal as each daemon left it (snapshot + replay); the small
        # one shows what starting a Python process costs by itself.
        restarts: dict[int, list[float]] = {n: [] for n in SIZES}
        for _ in range(3):
            for n, d in daemons.items():
                d.stop()
                restarts[n].append(d.start())
        for d in daemons.values():
            d.stop()
        big = daemons[SIZES[-1]]
        disk = load_and_snapshot(big.root / "state")
        from_snapshot = []
        for _ in range(3):
            from_snapshot.append(big.start())  # everything in the snapshot now
            big.stop()
        restart_s = {n: statistics.median(v) for n, v in restarts.items()}
        restart_snapshot_s = statistics.median(from_snapshot)

    p50 = {n: {k: summary(v)["p50_ms"] for k, v in s.items()} for n, s in samples.items()}
    small, large = SIZES
    ratio = statistics.median(samples[large]["update"]) / statistics.median(
        samples[small]["update"]
    )
    print(
        json.dumps(
            {
                "bench": "config",
                "instances": list(SIZES),
                "nodes": NODES,
                "build_s": {str(n): round(v, 2) for n, v in build_s.items()},
                "build_writes_per_s": round((large + NODES) / build_s[large]),
                "get_config_p50_ms": {str(n): p50[n]["get_config"] for n in SIZES},
                "get_config_target_ms": 30,
                "get_config_raw_p50_ms": {str(n): p50[n]["raw"] for n in SIZES},
                "get_config_after_write_raw_p50_ms": {str(n): p50[n]["after_write"] for n in SIZES},
                "get_object_p50_ms": {str(n): p50[n]["get_object"] for n in SIZES},
                "update_object_p50_ms": {str(n): p50[n]["update"] for n in SIZES},
                "update_object_ratio": round(ratio, 3),
                "update_object_target_ratio": 1.5,
                "restart_s": {str(n): round(v, 3) for n, v in restart_s.items()},
                "restart_from_snapshot_s": {str(large): round(restart_snapshot_s, 3)},
                **{f"inprocess_{k}": v for k, v in disk.items()},
                "rounds": ROUNDS,
            }
        )
    )


if __name__ == "__main__":
    main()
