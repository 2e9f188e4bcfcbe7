"""A master that lost its role stops its job processes (docs/contracts.md#replicated-control-plane):
SIGTERM, and SIGKILL for those still alive after the grace time; processes already gone (or whose
pid was reused) are left alone."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time

from client.identity import ProcessKey, is_alive, start_time_of
from luxid.term import stop_job_processes

IGNORES_TERM = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); print(1, flush=True); time.sleep(60)"
OBEYS_TERM = "import time; print(1, flush=True); time.sleep(60)"


def started(code: str) -> tuple[subprocess.Popen[bytes], ProcessKey]:
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    assert proc.stdout is not None and proc.stdout.readline() == b"1\n"  # handler installed
    start = start_time_of(proc.pid)
    assert start is not None
    return proc, ProcessKey(proc.pid, start)


def test_sigterm_then_sigkill_after_the_grace_time() -> None:
    stubborn, stubborn_key = started(IGNORES_TERM)
    polite, polite_key = started(OBEYS_TERM)
    bystander, bystander_key = started(OBEYS_TERM)
    reused = ProcessKey(bystander.pid, bystander_key.start_time + 1000.0)  # an old job's pid
    try:
        t = time.monotonic()
        asyncio.run(stop_job_processes([stubborn_key, polite_key, reused], kill_after=1.0))
        took = time.monotonic() - t
        assert polite.wait(5) == -15  # SIGTERM
        assert stubborn.wait(5) == -9  # SIGKILL, once the grace time was over
        assert 1.0 <= took < 5.0
        assert is_alive(bystander_key), "a process that merely reuses a job's pid was signalled"
    finally:
        for proc in (stubborn, polite, bystander):
            proc.kill()
            proc.wait()
