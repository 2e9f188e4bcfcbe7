"""`ping` round trips/s from one synchronous client: wconfd vs a bare asyncio echo server.

Both servers get the identical request frame from the identical minimal client loop, in
the same run, alternating rounds so machine noise hits both; the figure is the ratio of
medians (target >= 0.6, SPEC §11).  The stub's own rate (WConfdClient.ping) is reported
too, to show what a Python caller sees.
"""

from __future__ import annotations

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
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp, daemon("wconfd") as (run, _):
        echo_path = Path(tmp) / "echo.sock"
        echo = subprocess.Popen([sys.executable, "-c", ECHO_SERVER, str(echo_path)])
        try:
            wait_for_socket(echo_path, echo)
            wconfd_path = run / "wconfd.sock"
            rate(wconfd_path, 0.3)  # warm-up
            rate(echo_path, 0.3)
            lw, ref = [], []
            for _ in range(ROUNDS):
                lw.append(rate(wconfd_path, ROUND_SECONDS))
                ref.append(rate(echo_path, ROUND_SECONDS))
            stub = stub_rate(wconfd_path, ROUND_SECONDS)
        finally:
            echo.terminate()
            echo.wait(5)
    wconfd_rps, echo_rps = statistics.median(lw), statistics.median(ref)
    print(
        json.dumps(
            {
                "bench": "rpc_roundtrip",
                "wconfd_ping_per_s": round(wconfd_rps),
                "echo_per_s": round(echo_rps),
                "ratio": round(wconfd_rps / echo_rps, 3),
                "target_ratio": 0.6,
                "stub_ping_per_s": round(stub),
                "rounds": ROUNDS,
            }
        )
    )


if __name__ == "__main__":
    main()
