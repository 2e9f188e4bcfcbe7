"""Lock throughput (SPEC §11): durable acquire+release cycles/s.

1. One client, distinct locks: each cycle is try_update_locks(acquire) then
   try_update_locks(release), both journalled before the answer (target >= 3,000/s);
   and the same while the client holds 500 other locks (SPEC §4.4 rule 7: the journal
   cost grows with the change, so target >= 0.9 x without, measured alternately in the
   same run).
2. Eight client processes contending on four locks with update_locks_waiting: aggregate
   cycles/s (target >= 3,000/s), no lost update (each lock guards a counter file the
   holder increments), fairness: max wait <= 20x the median wait.
"""

from __future__ import annotations

import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This folder (first on sys.path) holds queue.py: put it last so the stdlib's queue wins;
# _util is still found here.
sys.path.append(sys.path.pop(0))

from _util import daemon

from client import WConfdClient

SINGLE_SECONDS = 3.0
HELD = 500
ALTERNATIONS = 3
CONTENDED_SECONDS = 5.0
WORKERS = 8
LOCKS = 4


def cycles_per_s(client: WConfdClient, seconds: float) -> float:
    """Acquire+release cycles per second on distinct node locks."""
    count = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        lock = f"node/n{count % 1000:04d}"
        client.try_update_locks([[lock, "exclusive"]])
        client.try_update_locks([[lock, "release"]])
        count += 1
    return count / (time.perf_counter() - start)


def single_client(socket: Path) -> dict[str, float]:
    """One client's cycles/s without and while holding 500 other locks (instance
    locks, before node in lock order), alternated so both see the same disk load."""
    held = [[f"instance/h{i:04d}", "exclusive"] for i in range(HELD)]
    part = SINGLE_SECONDS / ALTERNATIONS
    without: list[float] = []
    holding: list[float] = []
    with WConfdClient(socket, name="bench") as client:
        client.ping()
        for _ in range(ALTERNATIONS):
            without.append(cycles_per_s(client, part))
            assert client.try_update_locks(held) == []
            holding.append(cycles_per_s(client, part))
            client.free_locks()
    a, b = statistics.median(without), statistics.median(holding)
    return {
        "single_client_cycles_per_s": round(a),
        "holding_500_cycles_per_s": round(b),
        "holding_500_ratio": round(b / a, 3),
    }


def worker(socket: str, counters: str, seconds: float, seed: int) -> None:
    """One contending process: lock a random lock, bump its counter, release; report."""
    rng = random.Random(seed)
    client = WConfdClient(socket, name=f"w{seed}")
    client.ping()
    waits: list[float] = []
    cycles = 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        n = rng.randrange(LOCKS)
        lock = f"node/n{n}"
        t0 = time.perf_counter()
        result = client.update_locks_waiting([[lock, "exclusive"]])
        waits.append(time.perf_counter() - t0)
        assert result.granted
        path = Path(counters) / f"c{n}"
        path.write_text(str(int(path.read_text()) + 1))
        client.try_update_locks([[lock, "release"]])
        cycles += 1
    print(json.dumps({"cycles": cycles, "waits": waits}))


def contended(socket: Path) -> dict[str, float]:
    """Eight processes on four locks: aggregate rate, lost updates, fairness."""
    with tempfile.TemporaryDirectory() as counters:
        for n in range(LOCKS):
            (Path(counters) / f"c{n}").write_text("0")
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    __file__,
                    "--worker",
                    str(socket),
                    counters,
                    str(CONTENDED_SECONDS),
                    str(seed),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            for seed in range(WORKERS)
        ]
        start = time.perf_counter()
        reports = [json.loads(p.communicate()[0]) for p in procs]
        elapsed = time.perf_counter() - start
        total = sum(int((Path(counters) / f"c{n}").read_text()) for n in range(LOCKS))
    cycles = sum(r["cycles"] for r in reports)
    waits = [w for r in reports for w in r["waits"]]
    median = statistics.median(waits)
    return {
        "contended_cycles_per_s": round(cycles / min(elapsed, CONTENDED_SECONDS + 0.5)),
        "lost_updates": cycles - total,
        "wait_median_ms": round(median * 1000, 3),
        "wait_max_ms": round(max(waits) * 1000, 3),
        "max_over_median": round(max(waits) / median, 1),
    }


def main() -> None:
    with daemon("wconfd") as (run, _):
        socket = run / "wconfd.sock"
        single = single_client(socket)
        many = contended(socket)
    print(
        json.dumps(
            {
                "bench": "locks",
                **single,
                "target_single": 3000,
                "target_holding_500_ratio": 0.9,
                **many,
                "target_contended": 3000,
                "target_max_over_median": 20,
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]))
    else:
        main()
