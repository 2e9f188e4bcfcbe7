"""A job process's signal handlers (jobproc.signals): plain handlers that set the flags
with no event loop (during blocking calls), and wake an event loop that waits."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
from collections.abc import Iterator

import pytest
import uvloop

from jobproc.signals import JobSignals

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def signals() -> Iterator[JobSignals]:
    """JobSignals installed in this process; the previous handlers restored after."""
    before = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGUSR1)}
    job = JobSignals()
    job.install()
    try:
        yield job
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def test_without_a_loop_the_flags_are_set_at_once(signals: JobSignals) -> None:
    os.kill(os.getpid(), signal.SIGUSR1)
    assert signals.take_nudge() and not signals.canceled.is_set()
    assert not signals.interrupt.is_set()  # take_nudge cleared it
    os.kill(os.getpid(), signal.SIGTERM)
    assert signals.canceled.is_set() and signals.interrupt.is_set()


@pytest.mark.parametrize("make_loop", [asyncio.new_event_loop, uvloop.new_event_loop])
def test_a_signal_wakes_a_waiting_loop_at_once(signals: JobSignals, make_loop) -> None:
    loop = make_loop()
    signals.loop = loop
    main = threading.main_thread().ident
    assert main is not None

    async def waited() -> float:
        start = time.monotonic()
        await asyncio.wait_for(signals.interrupt.wait(), 10)
        return time.monotonic() - start

    try:
        threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGUSR1)).start()
        assert loop.run_until_complete(waited()) < 2  # not the 10 s of the poll's timeout
        assert signals.take_nudge()
        threading.Timer(0.1, signal.pthread_kill, (main, signal.SIGTERM)).start()
        assert loop.run_until_complete(signals.sleep(10)) is True  # canceled: ends early
    finally:
        loop.close()
