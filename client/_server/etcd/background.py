"""`Background`: a loop that runs as one task and gives back what it holds when stopped.

Shared by the election (which holds the leader key) and presence (which holds the node's
key): both hold an etcd lease while they run, and both must revoke it on a clean stop so
that others need not wait for it to lapse.
"""

from __future__ import annotations

import asyncio
import contextlib
from abc import ABC, abstractmethod


class Background(ABC):
    """Subclasses give `_run` (the loop) and `_release` (undo what the loop holds)."""

    def __init__(self, task_name: str) -> None:
        self._task_name = task_name
        self._task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Start the loop in a task of the running event loop (once)."""
        if self._task is None:
            self._task = asyncio.create_task(self._run(), name=self._task_name)

    async def stop(self) -> None:
        """Cancel the loop, wait for it, then release what it held."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None
        await self._release()

    @abstractmethod
    async def _run(self) -> None:
        """The loop; it runs until cancelled."""

    @abstractmethod
    async def _release(self) -> None:
        """Give back what the loop holds (e.g. revoke its lease)."""
