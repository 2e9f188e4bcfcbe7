"""The signals a job process obeys (docs/contracts.md#job-methods, cancel_job), as flags its
loop and its opcode see.

- SIGTERM: cancel.  The job stops at its next safe point: before the next opcode, while
  waiting for locks, or inside an interruptible opcode (`ctx.sleep` raises Canceled).
- SIGUSR1: "look again" from luxid (a PAUSE rule now applies, or the priority changed).
  A lock wait is interrupted so the process can ask luxid what to do.

luxid starts job processes with both signals blocked; `install` sets the handlers up and
only then unblocks them, so a signal sent at any time is seen.  They are plain Python
handlers, so they need no event loop: a job whose locks are free makes only blocking
calls and never creates one (jobproc.runner).  A handler runs between two bytecodes of
the job's thread — also during a blocking call, which the kernel interrupts and Python
resumes — and sets the flags at once; while an event loop runs (a wait for locks, an
interruptible sleep) the handler also wakes it (`call_soon_threadsafe`), so the waiters
the flags released run at once instead of when the loop's poll would have ended.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal

JOB_SIGNALS = {signal.SIGTERM, signal.SIGUSR1}


class JobSignals:
    """Cancel and nudge flags, set from the event loop's signal handlers."""

    def __init__(self) -> None:
        # Set once, never cleared.
        self.canceled = asyncio.Event()
        # Wakes an interruptible wait of the event loop (cancel or nudge).
        self.interrupt = asyncio.Event()
        self.nudged = False
        # The event loop the job waits on, once it has one (see the module docstring).
        self.loop: asyncio.AbstractEventLoop | None = None

    def install(self) -> None:
        """Handle SIGTERM/SIGUSR1, then unblock them."""
        signal.signal(signal.SIGTERM, self._handle)
        signal.signal(signal.SIGUSR1, self._handle)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_SIGNALS)

    def _handle(self, signum: int, frame: object) -> None:
        if signum == signal.SIGTERM:
            self.cancel()
        else:
            self.nudge()
        if self.loop is not None and self.loop.is_running():
            self.loop.call_soon_threadsafe(_wake)

    def cancel(self) -> None:
        """SIGTERM: cancel the job."""
        self.canceled.set()
        self.interrupt.set()

    async def sleep(self, seconds: float) -> bool:
        """Wait `seconds` on the event loop, less if the job is canceled; whether it is."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self.canceled.wait(), seconds)
        return self.canceled.is_set()

    def nudge(self) -> None:
        """SIGUSR1: interrupt a lock wait so the process asks luxid what to do."""
        self.nudged = True
        self.interrupt.set()

    def take_nudge(self) -> bool:
        """Whether a nudge came since the last call (and clear it)."""
        nudged, self.nudged = self.nudged, False
        if not self.canceled.is_set():
            self.interrupt.clear()
        return nudged


def _wake() -> None:
    """Nothing: scheduled from a signal handler only to wake the event loop's poll."""
