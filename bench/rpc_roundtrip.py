"""`ping` round trips/s from one synchronous client: wconfd vs a bare asyncio echo server,
with wconfd on asyncio's own event loop and on uvloop.

All servers get the identical request frame from the identical minimal client loop, in
the same run, alternating rounds so machine noise hits all; the figure is the ratio of
medians (target >= 0.7, docs/contracts.md#performance-targets).  The stub's own rate
(WConfdClient.ping) is reported too, to show what a Python caller sees, and durable lock
cycles/s (bench/locks.py's single client) on each loop: the numbers that decide whether uvloop is
a default dependency.
"""

from __future__ import annotations

import contextlib
import json
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This folder (first on sys.path) holds queue.py: put it last so the stdlib's queue wins;
# _util is still found here.
sys.path.append(sys.path.pop(0))

from _util import daemon, wait_for_socket
from locks import cycles_per_s

from client import WConfdClient

ECHO_SERVER = r"""
import asyncio, sys

async def handle(reader, writer):
    while line := await reader.readline():
        writer.write(line)
    writer.close()

async def main(path):
    server = await asyncio.start_unix_server(handle, path=path)
    async with server:
        await server.serve_forever()

asyncio.run(main(sys.argv[1]))
"""

FRAME = b'{"jsonrpc":"2.0","method":"ping","id":1}\n'
ROUND_SECONDS = 1.0
ROUNDS = 5
LOCK_ROUNDS = 3
LOOPS = ("asyncio", "uvloop")


def rate(path: Path, seconds: float) -> float:
    """Round trips per second of a blocking client sending FRAME and reading one line."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.connect(str(path))
        count = 0
        start = time.perf_counter()
        deadline = start + seconds
        while True:
            for _ in range(100):
                sock.sendall(FRAME)
                data = sock.recv(4096)
                while not data.endswith(b"\n"):
                    data += sock.recv(4096)
            count += 100
            now = time.perf_counter()
            if now >= deadline:
                return count / (now - start)


def lock_rate(path: Path, seconds: float) -> float:
    """Durable acquire+release cycles per second of one sync client (bench/locks.py's)."""
    with WConfdClient(path, name="bench") as client:
        client.ping()
        return cycles_per_s(client, seconds)


def stub_rate(path: Path, seconds: float) -> float:
    """Round trips per second through the generated WConfdClient stub."""
    with WConfdClient(path, name="bench") as client:
        count = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(100):
                client.ping()
            count += 100
        return count / (time.perf_counter() - start)


def main() -> None:
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(tempfile.TemporaryDirectory(prefix="lwbench-"))
        wconfd = {
            loop: stack.enter_context(daemon("wconfd", "--event-loop", loop))[0] / "wconfd.sock"
            for loop in LOOPS
        }
        echo_path = Path(tmp) / "echo.sock"
        echo = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(echo_path)])
        stack.callback(echo.wait, 5)
        stack.callback(echo.terminate)
        wait_for_socket(echo_path, echo)
        servers = {**{f"wconfd_{loop}": path for loop, path in wconfd.items()}, "echo": echo_path}
        pings: dict[str, list[float]] = {name: [] for name in servers}
        for path in servers.values():
            rate(path, 0.3)  # warm-up
        for _ in range(ROUNDS):
            for name, path in servers.items():
                pings[name].append(rate(path, ROUND_SECONDS))
        cycles: dict[str, list[float]] = {loop: [] for loop in LOOPS}
        for _ in range(LOCK_ROUNDS):
            for loop, path in wconfd.items():
                cycles[loop].append(lock_rate(path, ROUND_SECONDS))
        stub = {loop: stub_rate(path, ROUND_SECONDS) for loop, path in wconfd.items()}
    ping = {name: statistics.median(rates) for name, rates in pings.items()}
    lock = {loop: statistics.median(rates) for loop, rates in cycles.items()}
    out: dict[str, object] = {"bench": "rpc_roundtrip", "echo_per_s": round(ping["echo"])}
    for loop in LOOPS:
        out[f"wconfd_ping_per_s_{loop}"] = round(ping[f"wconfd_{loop}"])
        out[f"ratio_{loop}"] = round(ping[f"wconfd_{loop}"] / ping["echo"], 3)
        out[f"stub_ping_per_s_{loop}"] = round(stub[loop])
        out[f"lock_cycles_per_s_{loop}"] = round(lock[loop])
    out["uvloop_gain_ping"] = round(ping["wconfd_uvloop"] / ping["wconfd_asyncio"], 3)
    out["uvloop_gain_lock_cycles"] = round(lock["uvloop"] / lock["asyncio"], 3)
    out.update(target_ratio=0.7, rounds=ROUNDS, lock_rounds=LOCK_ROUNDS)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
