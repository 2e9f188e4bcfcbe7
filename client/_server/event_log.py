"""A daemon's event log: the kept events (client.events) and the event-driven
wait of watch_events (docs/contracts.md#events).

The daemon's store numbers each event in the same durable step as the change it tells of
and hands it here once durable (`publish`), or extends the ring itself and says so
(`woken`); either wakes every waiting watch_events call at once, with no polling.  The
event loop is the only thread.

Events are shown in steps: the first event after a quiet spell is visible (and wakes the
waiters) at once, the next ones within the wake interval become visible together at its
end.  A follower that comes back right after an answer thus waits for the next step
instead of getting the one event that came meanwhile: each follower gets one answer per
step, however busy the daemon.  A step costs one answer per follower, so the interval
grows with them (`WAKE_COST_PER_WAITER` for each call waiting, or woken by the last step
and on its way back, at most `MAX_WAKE_INTERVAL`): with 100
followers of a daemon writing thousands of events a second, each gets a few dozen batches
a second rather than one per event, which is what keeps them cheap, at a cost of at most
MAX_WAKE_INTERVAL of latency; a lone follower sees an event within a millisecond.

A follower (follow_events) is pushed each step's batch on its connection instead: no
request to read, decode and wait on per step, only the write; a step's notification is
encoded once for every follower at the same cursor.  A follower whose peer has not read
what was sent is skipped until its connection drains, then catches up from its cursor.

Lock events cost a journal write each, so wconfd produces them only while someone follows
topic `lock`: `lock_wanted` is true while a watch_events call asks for it, and for
`LOCK_INTEREST` seconds after the last one ended (a follower's next call comes within
that, so it misses nothing between two calls).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Iterable
from typing import Any, Final, Protocol

import msgspec

from client._server.change_serial import MAX_WAIT
from client.api.common import DEFAULT_TOPICS, CommonApi, Event
from client.errors import InvalidParams
from client.events import EventRing, RawBatch

_AnswerKey = tuple[int, frozenset[str], int]

LOCK_INTEREST: Final = 30.0
WAKE_COST_PER_WAITER: Final = 0.0004
MAX_WAKE_INTERVAL: Final = 0.04
MAX_SHARED_ANSWERS: Final = 64

# Batches pushed to one follower in one go before the others get their turn.
_PUSHES_AT_ONCE: Final = 8

_encoder = msgspec.json.Encoder()
_NOTIFICATION_HEAD = (
    b'{"jsonrpc":"2.0","method":"%s","params":'
    % str(CommonApi.methods()["follow_events"].options.pushes).encode()
)


class Follower(Protocol):
    """The connection a follower's notifications go to (client._server.server.Connection)."""

    on_close: list[Callable[[Any], None]]
    on_writable: list[Callable[[Any], None]]

    @property
    def writable(self) -> bool: ...

    def push(self, frame: bytes) -> None: ...

    def close(self) -> None: ...


class _Following:
    """Where one follower is: the index it was sent up to, what it follows."""

    __slots__ = ("conn", "cursor", "limit", "wanted")

    def __init__(self, conn: Follower, cursor: int, wanted: frozenset[str], limit: int) -> None:
        self.conn = conn
        self.cursor = cursor
        self.wanted = wanted
        self.limit = limit


class EventLog:
    """The ring of one daemon (replaceable: wconfd installs a new one per term) and the
    future its waiters share."""

    def __init__(self, daemon: str, ring: EventRing) -> None:
        self.daemon = daemon
        self._ring = ring
        self._visible = ring.last  # the newest index readers see (see the module doc)
        # One per waiting call: a step sets False (and drops the list), a timeout True.
        self._waiting: list[asyncio.Future[bool]] = []
        self._last_step = 0  # how many calls the last step woke (they are on their way back)
        self._last_wake = float("-inf")
        self._wake_due: asyncio.TimerHandle | None = None
        self._lock_watchers = 0
        self._lock_seen = float("-inf")
        self._loop_seen: asyncio.AbstractEventLoop | None = None
        # This step's answers by (after, topics, limit), encoded: the followers a step
        # wakes mostly come from the same cursor, and each answer is read and encoded once.
        self._answers: dict[_AnswerKey, msgspec.Raw] = {}
        self._followers: dict[Follower, _Following] = {}
        # This step's pushes by (cursor, topics, limit): the batch's `last` and its
        # notification (None: nothing to send), encoded once for every follower there.
        self._pushes: dict[_AnswerKey, tuple[int, bytes | None]] = {}

    def _loop(self) -> asyncio.AbstractEventLoop:
        """The running loop, looked up once per loop (on 3.11 each lookup is a getpid
        system call, and watch_events is the call 100 followers make 25 times a second)."""
        loop = self._loop_seen
        if loop is None or loop.is_closed():
            loop = self._loop_seen = asyncio.get_running_loop()
        return loop

    @property
    def ring(self) -> EventRing:
        """The kept events (wconfd installs a new ring per term)."""
        return self._ring

    @ring.setter
    def ring(self, ring: EventRing) -> None:
        self._ring = ring
        self._visible = ring.last
        self._answers.clear()
        self._pushes.clear()
        for following in list(self._followers.values()):
            if following.cursor > ring.last:  # not this ring's indexes: follow again
                following.conn.close()

    def close(self) -> None:
        """The term is over: every follower's connection is closed (it follows again
        wherever the daemon now serves, from its last `last`)."""
        for conn in list(self._followers):
            conn.close()

    @property
    def lock_wanted(self) -> bool:
        """Whether someone follows topic `lock` now (or did within LOCK_INTEREST s)."""
        return self._lock_watchers > 0 or time.monotonic() - self._lock_seen < LOCK_INTEREST

    def publish(self, events: Iterable[Event]) -> None:
        """Durable events, in index order: keep them and wake the watchers."""
        self.ring.extend(events)
        self.woken()

    def woken(self) -> None:
        """The ring changed: show its new events and wake every waiting watch_events
        call, now or at the end of the current interval."""
        if self._wake_due is not None:
            return  # a step is already due
        loop = self._loop()
        followers = max(len(self._waiting), self._last_step) + len(self._followers)
        interval = min(MAX_WAKE_INTERVAL, WAKE_COST_PER_WAITER * followers)
        wait = self._last_wake + interval - loop.time()
        if wait <= 0:
            self._wake()
        else:
            self._wake_due = loop.call_later(wait, self._wake)

    def _wake(self) -> None:
        self._wake_due = None
        self._last_wake = self._loop().time()
        self._visible = self._ring.last
        self._answers.clear()
        self._pushes.clear()
        waiting, self._waiting = self._waiting, []
        self._last_step = len(waiting)
        for fut in waiting:
            if not fut.done():
                fut.set_result(False)
        for following in list(self._followers.values()):
            self._push(following)

    def follow(
        self, conn: Follower, after: int, topics: Iterable[str] | None, limit: int
    ) -> msgspec.Raw:
        """follow_events: the events after `after` now (the answer), and `conn` pushed
        each later batch of `topics` until it closes."""
        if conn in self._followers:
            raise InvalidParams(
                "follow_events: this connection follows events already; "
                "open another connection to follow other topics"
            )
        wanted = DEFAULT_TOPICS if topics is None else frozenset(topics)
        batch = self._ring.read(after, wanted, limit, self._visible)
        following = _Following(conn, batch.last, wanted, limit)
        self._followers[conn] = following
        conn.on_close.append(self._unfollow)
        conn.on_writable.append(self._catch_up)
        if "lock" in wanted:
            self._lock_watchers += 1
        if following.cursor < self._visible:  # more than `limit`: after this answer
            self._loop().call_soon(self._catch_up, conn)
        return self._shared(after, wanted, limit, batch)

    def _unfollow(self, conn: Follower) -> None:
        following = self._followers.pop(conn, None)
        if following is not None and "lock" in following.wanted:
            self._lock_watchers -= 1
            self._lock_seen = time.monotonic()

    def _catch_up(self, conn: Follower) -> None:
        following = self._followers.get(conn)
        if following is not None:
            self._push(following)

    def _push(self, following: _Following) -> None:
        """Send `following` what is visible after its cursor, a batch at a time while its
        peer keeps reading; the rest when its connection drains (on_writable)."""
        conn = following.conn
        for _ in range(_PUSHES_AT_ONCE):
            if following.cursor >= self._visible or not conn.writable:
                return
            key = (following.cursor, following.wanted, following.limit)
            step = self._pushes.get(key)
            if step is None:
                try:
                    batch = self._ring.read(*key, self._visible)
                except InvalidParams:  # a cursor this ring does not have
                    conn.close()
                    return
                frame = None
                if batch.events or batch.gap:
                    frame = b"".join((_NOTIFICATION_HEAD, _encoder.encode(batch), b"}\n"))
                step = (batch.last, frame)
                if len(self._pushes) < MAX_SHARED_ANSWERS:
                    self._pushes[key] = step
            last, frame = step
            if frame is not None:
                conn.push(frame)
            if last <= following.cursor:  # no progress (cannot happen): wait for a step
                return
            following.cursor = last
        self._loop().call_soon(self._catch_up, conn)  # more to send: after the others

    async def watch(
        self, after: int, topics: Iterable[str] | None, timeout: float, limit: int
    ) -> msgspec.Raw:
        """watch_events: the events after `after` at once, or the first that come within
        `timeout` s (InvalidParams for an `after` above the newest index).  The answer is
        its JSON (a RawBatch: each event's kept JSON), which the stubs decode as an
        EventBatch."""
        wanted = DEFAULT_TOPICS if topics is None else frozenset(topics)
        follows_locks = "lock" in wanted
        if follows_locks:
            self._lock_watchers += 1
        loop = self._loop()
        deadline = loop.time() + min(timeout, MAX_WAIT)
        try:
            while True:
                shared = self._answers.get((after, wanted, limit))
                if shared is not None:
                    return shared
                batch = self._ring.read(after, wanted, limit, self._visible)
                left = deadline - loop.time()
                if batch.events or batch.gap or left <= 0:
                    return self._shared(after, wanted, limit, batch)
                after = batch.last  # what is left out by `topics` need not be read again
                if after < self._visible:  # a read of a store's older events stopped
                    await asyncio.sleep(0)  # short (client.events): read on, after the
                    continue  # others had their turn
                # A future of its own and a timer (cheaper than wait_for over a shared one).
                fut = loop.create_future()
                self._waiting.append(fut)
                timer = loop.call_later(left, _timed_out, fut)
                try:
                    await fut
                finally:
                    timer.cancel()
                    if not fut.done() or fut.cancelled() or fut.result():  # not woken by a step
                        with contextlib.suppress(ValueError):
                            self._waiting.remove(fut)
        finally:
            if follows_locks:
                self._lock_watchers -= 1
                self._lock_seen = time.monotonic()

    def _shared(
        self, after: int, wanted: frozenset[str], limit: int, batch: RawBatch
    ) -> msgspec.Raw:
        """`batch` encoded, and kept for the other followers at that cursor until the next
        step (an answer without events is not: it is cheap, and may change sooner)."""
        answer = msgspec.Raw(_encoder.encode(batch))
        if (batch.events or batch.gap) and len(self._answers) < MAX_SHARED_ANSWERS:
            self._answers[(after, wanted, limit)] = answer
        return answer


def _timed_out(fut: asyncio.Future[bool]) -> None:
    if not fut.done():
        fut.set_result(True)
