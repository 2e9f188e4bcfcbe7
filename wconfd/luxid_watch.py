"""wconfd watches its node's luxid (docs/operations.md#stalls): a master whose luxid hangs
gives the key up, and a standby whose luxid does not answer does not campaign.

A luxid that is stopped (SIGSTOP, a frozen process) keeps its socket: connections are
accepted by the kernel but nothing answers, so submissions stall on this node while the
leader key still names it. `LuxidWatch` pings luxid's socket in a task of its own with a
short timeout, so wconfd never blocks on it; `luxid_verdict` (pure) says what the last
answer means. A node without a luxid socket runs no luxid (a wconfd on its own): nothing
to watch, and nothing holds the node back.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable
from pathlib import Path

from client import AsyncLuxiClient, errors
from client._server.etcd.background import Background

log = logging.getLogger(__name__)

PING_INTERVAL = 0.5
PING_TIMEOUT = 1.0
# A luxid silent this long is hung: its master steps down.
HUNG_AFTER = 5.0


class Verdict(enum.Enum):
    ANSWERS = "answers"  # answered lately, or no luxid runs on this node
    SILENT = "silent"  # no answer lately: a standby waits before campaigning
    HUNG = "hung"  # silent for HUNG_AFTER: a master steps down


def luxid_verdict(last_answer: float, now: float, *, hung_after: float = HUNG_AFTER) -> Verdict:
    """What luxid's last answer at `last_answer` (monotonic) means at `now`."""
    silent = now - last_answer
    if silent >= hung_after:
        return Verdict.HUNG
    if silent >= 2 * PING_INTERVAL + PING_TIMEOUT:
        return Verdict.SILENT
    return Verdict.ANSWERS


class LuxidWatch(Background):
    """Pings `socket` every PING_INTERVAL; `on_hung(seconds)` once per silence that makes
    luxid hung (the caller decides whether that matters: only a master steps down)."""

    def __init__(
        self,
        socket: Path,
        on_hung: Callable[[float], None],
        *,
        hung_after: float = HUNG_AFTER,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__("luxid-watch")
        self.socket = socket
        self.on_hung = on_hung
        self.hung_after = hung_after
        self.clock = clock
        self.last_answer = clock()

    def verdict(self) -> Verdict:
        return luxid_verdict(self.last_answer, self.clock(), hung_after=self.hung_after)

    def answers(self) -> bool:
        """Whether this node's luxid answers (or none runs here): it may take the key."""
        return self.verdict() is Verdict.ANSWERS

    async def _release(self) -> None:
        """Nothing is held: the watch only asks."""

    async def _run(self) -> None:
        reported = False
        while True:
            began = self.clock()
            if not self.socket.exists() or await self._ping():
                if reported:
                    log.warning("luxid at %s answers again", self.socket)
                self.last_answer, reported = self.clock(), False
                await asyncio.sleep(PING_INTERVAL)
                continue
            if self.verdict() is Verdict.HUNG and not reported:
                reported = True
                self.on_hung(self.clock() - self.last_answer)
            # A ping that timed out already waited; one refused at once did not.
            await asyncio.sleep(max(0.05, PING_INTERVAL - (self.clock() - began)))

    async def _ping(self) -> bool:
        # Never wait past the moment luxid would be hung: the verdict comes on time.
        silent = self.clock() - self.last_answer
        timeout = max(0.1, min(PING_TIMEOUT, self.hung_after - silent))
        client = AsyncLuxiClient(self.socket, timeout=timeout, patience=0)
        try:
            async with asyncio.timeout(timeout):
                await client.ping()
            return True
        except (errors.RpcError, OSError, TimeoutError):
            return False
        finally:
            with contextlib.suppress(Exception):
                await client.close()
