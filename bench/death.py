"""Dead holder -> waiter granted (docs/contracts.md#performance-targets): kill -9 a lock holder,
time the waiter's grant.

Each trial starts a holder process that takes node/nK exclusively, queues this process's
update_locks_waiting behind it, kills the holder with SIGKILL and measures from the kill
to the answer.  Targets: p50 <= 5 ms, p99 <= 20 ms over >= 50 trials.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

# This folder (first on sys.path) holds queue.py: put it last so the stdlib's queue wins;
# _util is still found here.
sys.path.append(sys.path.pop(0))

from _util import daemon, summary

from client import AsyncWConfdClient

TRIALS = 60
HOLDER = (
    "import sys, time\n"
    "from client import WConfdClient\n"
    "wc = WConfdClient(sys.argv[1], name='holder')\n"
    "assert wc.try_update_locks([[sys.argv[2], 'exclusive']]) == []\n"
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


async def trial(client: AsyncWConfdClient, socket: Path, n: int) -> float:
    lock = f"node/n{n}"
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(socket), lock], stdout=subprocess.PIPE, text=True
    )
    assert holder.stdout is not None
    assert holder.stdout.readline().strip() == "held"
    waiter = asyncio.ensure_future(client.update_locks_waiting([[lock, "exclusive"]]))
    while not (await client.list_all_locks()).pending:
        await asyncio.sleep(0.005)
    start = time.perf_counter()
    os.kill(holder.pid, signal.SIGKILL)
    result = await waiter
    elapsed = time.perf_counter() - start
    assert result.granted
    holder.wait()
    await client.free_locks()
    return elapsed


async def run(socket: Path) -> list[float]:
    client = AsyncWConfdClient(socket, name="waiter")
    samples = [await trial(client, socket, n) for n in range(TRIALS)]
    await client.close()
    return samples


def main() -> None:
    with daemon("wconfd") as (run_dir, _):
        samples = asyncio.run(run(run_dir / "wconfd.sock"))
    print(
        json.dumps(
            {
                "bench": "death",
                "trials": len(samples),
                **summary(samples),
                "target_p50_ms": 5,
                "target_p99_ms": 20,
            }
        )
    )


if __name__ == "__main__":
    main()
