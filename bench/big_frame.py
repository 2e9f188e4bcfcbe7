"""Ping latency on one connection while another sends wconfd a big frame
(docs/contracts.md#framing: a frame over 1 MiB is decoded off the event loop; target: every
ping answered within 50 ms on an idle machine).

One client pings back to back and records each round trip; another sends frames of about
15 MiB (a JSON array of millions of small numbers: the costliest shape to decode), each
a request wconfd refuses once it has read it, so what is measured is the reading and
decoding of the frame beside the pings.  Printed: the pings' p50/p99/max while the big
frames were in flight, and how long each big frame took to be answered.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from multiprocessing.queues import Queue

# This folder holds queue.py: put it last so the stdlib's queue wins; _util is still found.
sys.path.append(sys.path.pop(0))

from _util import daemon

PING = b'{"jsonrpc":"2.0","method":"ping","id":1}\n'


def big_frame(mib: float, method: str) -> bytes:
    """A request of about `mib` MiB: params holding one array of small numbers."""
    count = int(mib * 1024 * 1024 / 2)
    numbers = b",".join([b"7"] * count)
    return (
        b'{"jsonrpc":"2.0","method":"'
        + method.encode()
        + b'","params":{"pad":['
        + numbers
        + b']},"id":9}\n'
    )


def read_line(sock: socket.socket) -> bytes:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise EOFError("closed")
        data += chunk
    return data


def send_big(path: Path, frame: bytes, frames: int, answered: Queue[float]) -> None:
    """In its own process (so the pinger never waits for this one's GIL): send the big
    frames one at a time, each answered before the next."""
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(path))
        for _ in range(frames):
            start = time.perf_counter()
            sock.sendall(frame)
            answer = json.loads(read_line(sock))
            assert "error" in answer, answer
            answered.put(time.perf_counter() - start)


def measure(path: Path, frame: bytes, frames: int) -> dict[str, object]:
    answered: Queue[float] = multiprocessing.get_context("fork").Queue()
    pings: list[float] = []
    with socket.socket(socket.AF_UNIX) as sock:
        sock.connect(str(path))
        for _ in range(200):  # warm-up
            sock.sendall(PING)
            read_line(sock)
        sender = multiprocessing.get_context("fork").Process(
            target=send_big, args=(path, frame, frames, answered)
        )
        sender.start()
        while sender.is_alive():
            start = time.perf_counter()
            sock.sendall(PING)
            read_line(sock)
            pings.append(time.perf_counter() - start)
        sender.join()
    ms = sorted(p * 1000 for p in pings)
    return {
        "pings": len(ms),
        "ping_p50_ms": round(statistics.median(ms), 3),
        "ping_p99_ms": round(ms[int(len(ms) * 0.99) - 1], 3),
        "ping_max_ms": round(ms[-1], 3),
        "big_frame_answer_s": [round(answered.get(timeout=5), 3) for _ in range(frames)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--mib", type=float, default=15.0, help="size of each big frame")
    parser.add_argument("--frames", type=int, default=3, help="big frames sent, one at a time")
    args = parser.parse_args()
    with daemon("wconfd") as (run, _state):
        path = run / "wconfd.sock"
        out: dict[str, object] = {"bench": "big_frame", "frame_mib": args.mib}
        # An unknown method: refused after the decode; a known one: after its params' check.
        for label, method in (("unknown_method", "no_such_method"), ("ping_with_params", "ping")):
            out[label] = measure(path, big_frame(args.mib, method), args.frames)
    out["target_ping_max_ms"] = 50
    print(json.dumps(out))


if __name__ == "__main__":
    main()
