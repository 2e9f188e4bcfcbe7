"""A daemon's event log: the kept events (client.events) and the event-driven
wait of watch_events (docs/contracts.md#events).

The daemon's store numbers each event in the same durable step as the change it tells of
and hands it here once durable (`publish`), or extends the ring itself and says so
(`woken`); either wakes every waiting watch_events call at once, with no polling.  The
event loop is the only thread.

Wakes are coalesced: the first event after a quiet spell wakes the waiters at once, the
next ones within `WAKE_INTERVAL` are gathered into one wake at its end.  A busy daemon
(thousands of events a second) thus answers each follower a few hundred batches a second
rather than one per event, which is what keeps 100 followers cheap, at a cost of at most
WAKE_INTERVAL of latency.

Lock events cost a journal write each, so wconfd produces them only while someone follows
topic `lock`: `lock_wanted` is true while a watch_events call asks for it, and for
`LOCK_INTEREST` seconds after the last one ended (a follower's next call comes within
that, so it misses nothing between two calls).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable
from typing import Final

from client._server.change_serial import MAX_WAIT
from client.api.common import DEFAULT_TOPICS, Event
from client.events import EventRing, RawBatch

LOCK_INTEREST: Final = 30.0
WAKE_INTERVAL: Final = 0.005


class EventLog:
    """The ring of one daemon (replaceable: wconfd installs a new one per term) and the
    future its waiters share."""

    def __init__(self, daemon: str, ring: EventRing) -> None:
        self.daemon = daemon
        self.ring = ring
        self._changed: asyncio.Future[None] | None = None
        self._last_wake = float("-inf")
        self._wake_due: asyncio.TimerHandle | None = None
        self._lock_watchers = 0
        self._lock_seen = float("-inf")

    @property
    def lock_wanted(self) -> bool:
        """Whether someone follows topic `lock` now (or did within LOCK_INTEREST s)."""
        return self._lock_watchers > 0 or time.monotonic() - self._lock_seen < LOCK_INTEREST

    def publish(self, events: Iterable[Event]) -> None:
        """Durable events, in index order: keep them and wake the watchers."""
        self.ring.extend(events)
        self.woken()

    def woken(self) -> None:
        """The ring changed: wake every waiting watch_events call (now, or at the end of
        the current coalescing interval)."""
        if self._changed is None or self._wake_due is not None:
            return  # nobody waits, or a wake is already due
        loop = asyncio.get_running_loop()
        wait = self._last_wake + WAKE_INTERVAL - loop.time()
        if wait <= 0:
            self._wake()
        else:
            self._wake_due = loop.call_later(wait, self._wake)

    def _wake(self) -> None:
        self._wake_due = None
        self._last_wake = asyncio.get_running_loop().time()
        fut, self._changed = self._changed, None
        if fut is not None and not fut.done():
            fut.set_result(None)

    async def watch(
        self, after: int, topics: Iterable[str] | None, timeout: float, limit: int
    ) -> RawBatch:
        """watch_events: the events after `after` at once, or the first that come within
        `timeout` s (InvalidParams for an `after` above the newest index).  The answer
        carries each event's kept JSON; the stubs decode it as an EventBatch."""
        wanted = DEFAULT_TOPICS if topics is None else frozenset(topics)
        follows_locks = "lock" in wanted
        if follows_locks:
            self._lock_watchers += 1
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(timeout, MAX_WAIT)
        try:
            while True:
                batch = self.ring.read(after, wanted, limit)
                left = deadline - loop.time()
                if batch.events or batch.gap or left <= 0:
                    return batch
                after = batch.last  # what is left out by `topics` need not be read again
                fut = self._changed
                if fut is None:
                    fut = self._changed = loop.create_future()
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(asyncio.shield(fut), left)
        finally:
            if follows_locks:
                self._lock_watchers -= 1
                self._lock_seen = time.monotonic()
