"""luxid's role is its wconfd's role (docs/operations.md#stalls).

The leader key says which node is master, but a master's wconfd can stop being master
before the key changes (it gave up a lease it could not prove; the revoke is on its way),
and after a pause of the whole node the key luxid last saw may be seconds old. So luxid
asks its own wconfd (`get_role` over the local socket, every POLL_INTERVAL, in a task of its
own) and `judge` (pure) says what the last answer means for the term luxid serves:

- CONFIRMED: wconfd serves as master of that term, and said so within FRESH seconds: luxid
  may answer calls and start jobs;
- DOUBT: no fresh answer (wconfd restarting, stalled, or luxid itself was paused), or
  wconfd holds the key without serving yet (loading, proving its lease after a pause):
  calls wait a moment, the term and its jobs stay;
- DEPOSED: wconfd names another master of this or a later term, none, or this node in
  another term: the term ends at once (an answer naming the master of an earlier term
  only lags behind the key: DOUBT).

A wconfd on local files (term 0) has no say: it is the only node, always master.  Nor has
one whose socket does not exist at all (no wconfd on this node, as in tests that start a
luxid alone): luxid then follows the leader key alone, as it did before this watch.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
import time
from collections.abc import Callable
from pathlib import Path

from client import AsyncWConfdClient, errors
from client._server.etcd.background import Background
from client.api.common import RoleInfo

log = logging.getLogger(__name__)

POLL_INTERVAL = 0.2
POLL_TIMEOUT = 1.0
# An answer older than this no longer confirms the term (luxid may have been paused).
FRESH = 1.0


class Agreement(enum.Enum):
    CONFIRMED = "confirmed"
    DOUBT = "doubt"
    DEPOSED = "deposed"


def judge(answer: RoleInfo | None, received: float, now: float, node: str, term: int) -> Agreement:
    """What wconfd's `answer` (received at `received`, monotonic) says of this node's
    luxid serving `term` at `now`."""
    if answer is None:
        return Agreement.DOUBT
    if answer.term == 0 and answer.role == "master":
        return Agreement.CONFIRMED if now - received < FRESH else Agreement.DOUBT
    if answer.term < term and answer.master not in (None, node):
        return Agreement.DOUBT  # wconfd still names the old master: it has not seen the key yet
    if answer.master != node or answer.term != term:
        return Agreement.DEPOSED
    if answer.role != "master" or now - received >= FRESH:
        return Agreement.DOUBT
    return Agreement.CONFIRMED


class WconfdRoleWatch(Background):
    """Polls the local wconfd's `get_role`; `on_change()` after each answer that differs
    from the one before (and after the first)."""

    def __init__(
        self,
        socket: Path,
        node: str,
        on_change: Callable[[], None],
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__("wconfd-role")
        self.socket = socket
        self.node = node
        self.on_change = on_change
        self.clock = clock
        self.answer: RoleInfo | None = None
        self.received = 0.0
        self.absent = False  # no wconfd socket on this node: the key alone says
        self._poll_now = asyncio.Event()
        self._answered = asyncio.Event()

    def agreement(self, term: int) -> Agreement:
        if self.absent:
            return Agreement.CONFIRMED
        return judge(self.answer, self.received, self.clock(), self.node, term)

    async def _release(self) -> None:
        """Nothing is held: the watch only asks."""

    def poll_soon(self) -> None:
        """Ask wconfd now (the leader key changed: its answer will follow)."""
        self._poll_now.set()

    async def fresh_answer(self, timeout: float) -> None:
        """Ask wconfd now and wait (up to `timeout`) for its answer."""
        self._answered.clear()
        self._poll_now.set()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._answered.wait(), timeout)

    async def _run(self) -> None:
        client = AsyncWConfdClient(self.socket, name="luxid-role", timeout=POLL_TIMEOUT, patience=0)
        try:
            while True:
                await self._poll(client)
                self._poll_now.clear()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._poll_now.wait(), POLL_INTERVAL)
        finally:
            with contextlib.suppress(Exception):
                await client.close()

    async def _poll(self, client: AsyncWConfdClient) -> None:
        absent = not self.socket.exists()
        if absent != self.absent:
            self.absent, self.answer = absent, None
            if absent:
                log.warning(
                    "no wconfd socket at %s: luxid follows the leader key alone", self.socket
                )
            self.on_change()
        if absent:
            self._answered.set()
            return
        try:
            async with asyncio.timeout(POLL_TIMEOUT):
                answer = await client.get_role()
        except (errors.RpcError, OSError, TimeoutError):
            with contextlib.suppress(Exception):
                await client.close()  # a fresh connection next time
            return
        changed = answer != self.answer
        self.answer, self.received = answer, self.clock()
        self._answered.set()
        if changed:
            log.info(
                "wconfd says: %s, master %s (term %d)", answer.role, answer.master, answer.term
            )
            self.on_change()
