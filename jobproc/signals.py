"""The signals a job process obeys (SPEC §6.2, §7), as flags its loop and its opcode see.

- SIGTERM: cancel.  The job stops at its next safe point: before the next opcode, while
  waiting for locks, or inside an interruptible opcode (`ctx.sleep` raises Canceled).
- SIGUSR1: "look again" from luxid (a PAUSE rule now applies, or the priority changed).
  A lock wait is interrupted so the process can ask luxid what to do.

luxid starts job processes with both signals blocked; `install` sets the handlers up on
the event loop and only then unblocks them, so a signal sent at any time is seen.  The
handlers run whenever the loop runs: while the job waits for a daemon, for locks or in an
interruptible sleep (jobproc.runner: the opcode's own code runs between those waits).
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

    def install(self, loop: asyncio.AbstractEventLoop) -> None:
        """Handle SIGTERM/SIGUSR1 on `loop`, then unblock them."""
        loop.add_signal_handler(signal.SIGTERM, self.cancel)
        loop.add_signal_handler(signal.SIGUSR1, self.nudge)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, JOB_SIGNALS)

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
