"""A change serial: a number a daemon bumps on every change of something it watches, and
the event-driven wait on it (luxid's `wait_queue_change`, wconfd's `wait_locks_change`).

A watcher (the dashboard's event stream) reads the serial, then the state, and asks to be
woken once the serial is not that number any more: every change after the read bumps it,
so none is missed, and nothing is polled.  The serial starts at the daemon's start time in
microseconds, so a restarted daemon never answers a number its predecessor handed out
(a watcher that saw 57 before the restart is not kept waiting for 58).
"""

from __future__ import annotations

import asyncio
import contextlib
import time

# The longest wait honoured (a day); longer timeouts are cut, as wait_for_job_change's.
MAX_WAIT = 86400.0


class ChangeSerial:
    """The serial and the one future all its current waiters share (event loop only)."""

    __slots__ = ("_changed", "value")

    def __init__(self) -> None:
        self.value = time.time_ns() // 1000
        self._changed: asyncio.Future[None] | None = None

    def bump(self) -> None:
        """Something watched changed: a new serial, and every waiter is woken."""
        self.value += 1
        fut, self._changed = self._changed, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def wait(self, since_serial: int, timeout: float) -> int:
        """The serial as soon as it is not `since_serial`, or the current one after
        `timeout` seconds (at once when it already differs or `timeout` is 0)."""
        if self.value != since_serial or timeout <= 0:
            return self.value
        fut = self._changed
        if fut is None:
            fut = self._changed = asyncio.get_running_loop().create_future()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(fut), min(timeout, MAX_WAIT))
        return self.value
