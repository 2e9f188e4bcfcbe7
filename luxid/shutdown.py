"""Bounded waits for luxid's way out (SPEC §10: a stop never hangs).

Every await on the way out of luxid (the wconfd link, the store's writer thread, the
zygote, open connections) goes through `bounded`, so luxid exits within its stop budget
whatever the other daemon does, and says what it is still waiting for meanwhile.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable
from typing import Any

log = logging.getLogger(__name__)

# How often a bounded wait at stop says what it is still waiting for.
REPORT_EVERY = 1.0


async def bounded(what: str, work: Awaitable[Any], timeout: float) -> bool:
    """Await `work` for at most `timeout` seconds, saying every second that luxid is still
    waiting for `what`; False (and `work` cancelled) if the time ran out."""
    task = asyncio.ensure_future(work)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        left = deadline - loop.time()
        if left <= 0:
            task.cancel()
            log.error("stopping: gave up waiting for %s after %.1f s", what, timeout)
            return False
        done, _ = await asyncio.wait({task}, timeout=min(left, REPORT_EVERY))
        if done:
            return True
        log.warning("stopping: still waiting for %s", what)
