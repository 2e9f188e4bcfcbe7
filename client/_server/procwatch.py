"""Death detection: know within milliseconds when a watched process is gone.

Each watched process gets a pidfd registered with the event loop (readable when it exits,
zombies included); a periodic psutil sweep covers systems without pidfd and processes
whose pidfd could not be opened.  wconfd watches its clients with it, luxid its job
processes (it need not be their parent).  Processes are named by `client.identity`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections.abc import Callable

from client.identity import ProcessKey, is_alive

log = logging.getLogger(__name__)

DEFAULT_SWEEP_INTERVAL = 5.0


class ProcessWatcher:
    """Calls `on_death(key)` once for each watched process that ends.

    `watch` is idempotent per key; `unwatch` stops watching without a call.  Runs on
    the current event loop; `start()` begins the fallback sweep.
    """

    def __init__(
        self,
        on_death: Callable[[ProcessKey], None],
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
    ) -> None:
        self._on_death = on_death
        self._sweep_interval = sweep_interval
        self._pidfds: dict[ProcessKey, int] = {}
        self._watched: set[ProcessKey] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin the periodic psutil sweep."""
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    def stop(self) -> None:
        """Stop the sweep and close every pidfd."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for key in list(self._watched):
            self.unwatch(key)

    def watched(self) -> set[ProcessKey]:
        """The processes being watched now."""
        return set(self._watched)

    def watch(self, key: ProcessKey) -> None:
        """Start watching `key`; a process already gone is reported on the next loop turn."""
        if key in self._watched:
            return
        self._watched.add(key)
        loop = asyncio.get_running_loop()
        fd = self._open_pidfd(key.pid)
        if fd is not None:
            self._pidfds[key] = fd
            loop.add_reader(fd, self._reported, key)
        # Checked after the pidfd is open, so a death in between is not missed and a
        # pid already reused by another process is recognised by its start time.
        if not is_alive(key):
            loop.call_soon(self._reported, key)

    def unwatch(self, key: ProcessKey) -> None:
        """Stop watching `key` without reporting it."""
        self._watched.discard(key)
        fd = self._pidfds.pop(key, None)
        if fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)

    def sweep(self) -> list[ProcessKey]:
        """Check every watched process now; report and return the dead ones."""
        dead = [key for key in list(self._watched) if not is_alive(key)]
        for key in dead:
            self._reported(key)
        return dead

    def _reported(self, key: ProcessKey) -> None:
        if key not in self._watched:
            return
        self.unwatch(key)
        try:
            self._on_death(key)
        except Exception:
            log.exception("death handler failed for pid %d", key.pid)

    @staticmethod
    def _open_pidfd(pid: int) -> int | None:
        opener = getattr(os, "pidfd_open", None)
        if opener is None:
            return None
        try:
            return int(opener(pid))
        except OSError:
            return None

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_interval)
            try:
                self.sweep()
            except Exception:
                log.exception("death sweep failed")
