"""Where one durable lock acquire+release cycle's time goes (issue 11), as JSON.

Each part is timed on its own, in this process, then the whole over the socket, all in
one run so the ratios hold on a loaded machine:

- `flush_us`: one RWF_DSYNC write of one lock record into preallocated journal space
  (the disk floor: a sync client's cycle is two answered calls, each durable first,
  so at most 1e6 / (2 * flush_us) cycles/s);
- `decode_params_us`: the declared params' decode and validation of one call;
- `lock_core_us`: the pure lock core for one call (try_update);
- `journal_encode_us`: LockChange record -> msgpack -> frame;
- `server_call_us`: one call through wconfd's whole dispatch in process (guard,
  params, core, journal write incl. flush, answer), no socket; also without the flush
  (the CPU cost), and without the flush while the caller holds 500 other locks (lock
  rule 7, docs/contracts.md#lock-rules: the same cost, since the journal records the change only);
- `socket_call_us`: one call over the Unix socket to a running wconfd (the client's
  view); minus `server_call_us` it is transport and the stub's own encode/decode;
- `ping_us`: a ping over the socket (transport + dispatch, no core, no disk).
"""

from __future__ import annotations

import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.append(sys.path.pop(0))  # bench/queue.py must not shadow the stdlib's queue

from _util import daemon, per_call_us
from locks import flush_us

from client import WConfdClient
from client._server.dispatch import build_methods, dispatch_one
from client.api.wconfd import WConfdApi
from client.identity import ProcessKey
from wconfd.clients import Client
from wconfd.durable_state import LockChange
from wconfd.locking import LockManager
from wconfd.storage.fileops import FileOps
from wconfd.storage.journal_format import encode_frame

ROUNDS = 2000


def in_process() -> dict[str, float]:
    spec = WConfdApi.methods()["try_update_locks"]
    acquire = {"request": [["node/n0001", "exclusive"]]}
    release = {"request": [["node/n0001", "release"]]}
    decode = per_call_us(lambda: spec.decode_params((), acquire))
    mgr = LockManager()

    def core_cycle() -> None:
        mgr.try_update("c", acquire["request"])
        mgr.try_update("c", release["request"])

    core = per_call_us(core_cycle) / 2
    import msgspec

    enc = msgspec.msgpack.Encoder()
    rec = LockChange("job-1:1234:1700000000.00", [("node/n0001", "exclusive")])
    encode = per_call_us(lambda: encode_frame(enc.encode(rec), 1, 1))
    return {"decode_params_us": decode, "lock_core_us": core, "journal_encode_us": encode}


class _NoSync(FileOps):
    """File operations without the flush: what a call costs on the CPU alone."""

    def pwrite_dsync(self, fd: int, data: bytes | memoryview, offset: int) -> None:
        self.pwrite(fd, data, offset)

    def fdatasync(self, fd: int) -> None:
        pass


def server_call_us(state: Path, sync: bool = True, held: int = 0) -> float:
    """try_update_locks through the whole in-process dispatch of a real WConfd
    (without the flush if not `sync`), the caller holding `held` other locks."""
    import wconfd.persistence
    from wconfd.service import WConfd
    from wconfd.storage.store import LocalStore

    def store(directory: Any, name: str, **kw: Any) -> LocalStore[Any, Any]:
        return LocalStore(directory, name, file_ops=None if sync else _NoSync(), **kw)

    async def run() -> float:
        real = wconfd.persistence.LocalStore
        wconfd.persistence.LocalStore = store  # type: ignore[assignment,misc]
        try:
            service = WConfd(state)
        finally:
            wconfd.persistence.LocalStore = real  # type: ignore[misc]
        methods = build_methods(WConfdApi, *service.implementations(), guard=service.guard)

        class Conn:
            session = Client("bench:1:1.00", None, "bench", ProcessKey(1, 1.0))

        conn = Conn()
        msgs = [
            {"jsonrpc": "2.0", "method": "try_update_locks", "params": p, "id": 1}
            for p in (
                {"request": [["node/n1", "exclusive"]]},
                {"request": [["node/n1", "release"]]},
            )
        ]
        hold = [[f"instance/h{i:04d}", "exclusive"] for i in range(held)]
        if hold:
            msg = {"jsonrpc": "2.0", "method": "try_update_locks", "params": [hold], "id": 0}
            assert (await dispatch_one(msg, methods, conn) or {}).get("result") == []
        samples = []
        for _ in range(5):
            t0 = time.perf_counter()
            for i in range(ROUNDS // 5):
                await dispatch_one(msgs[i % 2], methods, conn)
            samples.append((time.perf_counter() - t0) / (ROUNDS // 5))
        service.close()
        return statistics.median(samples) * 1e6

    return asyncio.run(run())


def over_socket(socket: Path) -> dict[str, float]:
    with WConfdClient(socket, name="breakdown") as client:
        client.ping()
        ping = per_call_us(client.ping)
        n = 0

        def call() -> None:
            nonlocal n
            client.try_update_locks([["node/n1", "exclusive" if n % 2 == 0 else "release"]])
            n += 1

        lock = per_call_us(call)
    return {"ping_us": ping, "socket_call_us": lock}


ROUNDS_OF_ALL = 3


def main() -> None:
    """Interleave the disk-bound parts over a few rounds (the disk is shared and noisy)
    and report the medians."""
    parts = in_process()
    rows: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
        root = Path(tmp)
        with daemon("wconfd") as (run, _):
            for i in range(ROUNDS_OF_ALL):
                got = {
                    "flush_us": flush_us(root),
                    "server_call_us": server_call_us(root / f"sync{i}"),
                    "server_call_no_flush_us": server_call_us(root / f"nosync{i}", sync=False),
                    "server_call_no_flush_holding_500_us": server_call_us(
                        root / f"held{i}", sync=False, held=500
                    ),
                    **over_socket(run / "wconfd.sock"),
                }
                for key, value in got.items():
                    rows.setdefault(key, []).append(value)
    med = {key: statistics.median(values) for key, values in rows.items()}
    flush = med["flush_us"]
    sock = med
    out: dict[str, Any] = {"bench": "lock_breakdown", **parts, **med}
    out["dispatch_overhead_us"] = (
        med["server_call_no_flush_us"]
        - parts["decode_params_us"]
        - parts["lock_core_us"]
        - parts["journal_encode_us"]
    )
    out["transport_and_stub_us"] = sock["socket_call_us"] - med["server_call_us"]
    out["cycle_us"] = 2 * sock["socket_call_us"]
    out["cycles_per_s"] = 1e6 / out["cycle_us"]
    out["flush_floor_cycles_per_s"] = 1e6 / (2 * flush)
    out["flush_share_of_cycle"] = 2 * flush / out["cycle_us"]
    out["holding_500_cpu_ratio"] = (
        med["server_call_no_flush_us"] / med["server_call_no_flush_holding_500_us"]
    )
    print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in out.items()}))


if __name__ == "__main__":
    main()
