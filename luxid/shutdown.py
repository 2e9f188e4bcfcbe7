"""Bounded waits for luxid's way out: a stop never hangs
(docs/contracts.md#reliability-and-security).

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


async def finish_tasks(timeout: float) -> bool:
    """Cancel every other task of the loop and wait (bounded) until they are done.

    asyncio.run would wait for them without a bound; a task that refuses to end is
    logged by name, with where it waits, and False is returned.
    """
    current = asyncio.current_task()
    others = {t for t in asyncio.all_tasks() if t is not current and not t.done()}
    for task in others:
        task.cancel()
    if not others or await bounded(f"{len(others)} task(s) to end", asyncio.wait(others), timeout):
        return True
    for task in others:
        if not task.done():
            log.error(
                "stopping: task %s does not end: %s", task.get_name(), task.get_stack(limit=3)
            )
    return False
