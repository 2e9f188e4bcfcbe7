"""A stop signal that arrives while a daemon starts is a clean stop, not the default death.

The daemon runner catches SIGTERM/SIGINT in its first step on the loop; before, the handler
came only once the daemon waited for the signal, so a SIGTERM sent just as the socket began
answering (systemd, or a test right after start) killed the process with -15.  Each check
runs in a child interpreter, since a lost signal would kill pytest itself.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

# Starting up takes a while; the signal arrives in its middle, before the wait begins.
CHILD = """
import asyncio, os, signal, sys
from client._server import runner

async def serve():
    os.kill(os.getpid(), signal.{sig})   # during start-up
    await asyncio.sleep(0.05)            # the rest of start-up runs on
    await runner.wait_for_stop_signal()  # returns at once: the stop was kept
    print("stopped cleanly")

asyncio.run(runner._daemon_main(serve()))
"""


@pytest.mark.parametrize("sig", ["SIGTERM", "SIGINT"])
def test_signal_during_start_up_is_a_clean_stop(sig):
    _stops_cleanly(CHILD.format(sig=sig))


def _stops_cleanly(program: str) -> None:
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert done.stdout.strip() == "stopped cleanly"
