"""wconfd's lock methods (docs/contracts.md#lock-operations): the shell around the pure
LockManager.

The core decides; this module holds calls open while requests wait, answers them when
an operation's Effects say they were granted or withdrawn, and makes every change of
held locks durable before any call that caused or observed it is answered: the pairs the
core reports as changed go to the journal as they are (`LockChange`, one per owner, all
of one operation in one write), so the cost grows with the change
(docs/contracts.md#lock-rules, durability before the answer).

While someone follows topic `lock` (docs/contracts.md#events; `lock_events_wanted`), an
operation's grants and releases, and a request that starts waiting, also go to the journal
as lock events (an `EventNote` in the same write); otherwise not one more byte is written.

It also keeps the lock metrics (docs/observability.md#where-each-metric-is-updated): the
time each granted `update_locks_waiting` request waited (0 for one granted at once), by
`_wait_level`; the requests refused as deadlocks; and, read from the core's own counts when
a scrape asks, the locks held by level and mode and the requests waiting.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any, cast

from client._server.change_serial import ChangeSerial
from client._server.metrics import Registry
from client.api.common import Event
from client.api.wconfd import (
    AllLocks,
    LockInfo,
    LockOwner,
    LockRequest,
    LockWait,
    Mode,
    PendingInfo,
    WaitResult,
)
from client.errors import DeadlockError, InvalidParams, NotMaster, RpcError, StorageError
from wconfd.clients import Client, parse_client_id
from wconfd.durable_state import EventNote, LockChange, Record
from wconfd.locking import LEVELS, Effects, LockManager
from wconfd.locking.events import change_events, waiting_events
from wconfd.persistence import Persistence

log = logging.getLogger(__name__)


def _wait_level(request: LockRequest) -> str:
    """The level a request's wait is filed under: that of the first lock it wants
    exclusively, else of its first lock ("" for an empty request).  A job asks for
    `cluster/BGL` shared before its own locks: the first exclusive one says what it
    really waits for."""
    first = next((name for name, mode in request if mode == "exclusive"), None)
    if first is None:
        first = request[0][0] if request else ""
    return first.partition("/")[0]


def job_of_client(client_id: str) -> int | None:
    """The job id in a client id (None for a client that is no job, or an id that is no
    client id: a restored holding's owner is whatever the journal says)."""
    try:
        return parse_client_id(client_id)[0]
    except ValueError:
        return None


class LockService:
    """The lock methods over the lock core; lock changes go to `persistence`.

    Methods receive the identified `Client` (the dispatch guard identified it once)."""

    def __init__(
        self,
        persistence: Persistence,
        locks: LockManager,
        metrics: Registry,
        lock_events_wanted: Callable[[], bool] = lambda: False,
    ) -> None:
        self.persistence = persistence
        self.locks = locks
        self.lock_events_wanted = lock_events_wanted
        # owner -> the calls waiting for its queued request, one future each (a re-issued
        # call waits beside the first; each can end alone)
        self._waits: dict[str, list[asyncio.Future[WaitResult]]] = {}
        self.serial = ChangeSerial()  # wait_locks_change
        # owner -> (monotonic time its waiting request was queued, level of its first lock)
        self._waiting_since: dict[str, tuple[float, str]] = {}
        self._wait_seconds = metrics.histogram("lockwarden_lock_wait_seconds")
        self._deadlocks = metrics.counter("lockwarden_deadlocks_total")
        self._held = metrics.gauge("lockwarden_locks_held")
        self._pending = metrics.gauge("lockwarden_lock_requests_pending")
        metrics.before_snapshot(self._publish_counts)
        self._opp_waits: dict[str, asyncio.Future[list[str]]] = {}
        self._background: set[asyncio.Task[None]] = set()

    # -- effects -----------------------------------------------------------------------

    async def settle(self, effects: Effects, waiting: list[Event] | None = None) -> None:
        """Persist what changed, then answer the waits the operation ended (as soon as
        the change is durable, before this call resumes).  Every lock operation ends
        here, so the lock table's change serial is bumped here too.  `waiting`: the
        events of a request that began waiting (only while lock events are wanted)."""
        self.serial.bump()
        if effects.empty() and not waiting:
            return
        records: list[Record] = [
            LockChange(owner, pairs) for owner, pairs in effects.changes.items()
        ]
        if self.lock_events_wanted():
            held = self.persistence.state.locks
            events = change_events(
                effects.changes, lambda owner, lock: held.get(owner, {}).get(lock), time.time()
            )
            events += waiting or ()
            if events:
                records.append(EventNote(events))
        if not records:
            self._answer_waits(effects)
            return
        try:
            await self.persistence.commit(records, then=lambda: self._answer_waits(effects))
        except StorageError as exc:
            self._fall_back_to_durable_locks(exc)
            raise

    def _answer_waits(self, effects: Effects) -> None:
        """Answer the waiting calls an operation granted, withdrew or ended."""
        now = time.monotonic()
        for owner in effects.granted:
            self._waited(owner, now)
            self._resolve_calls(owner, WaitResult(granted=True, blockers=[]))
        for owner, blockers in effects.withdrawn.items():
            self._waiting_since.pop(owner, None)
            self._resolve_calls(owner, WaitResult(granted=False, blockers=blockers))
        for owner, locks in effects.opportunistic.items():
            fut = self._opp_waits.pop(owner, None)
            if fut is not None and not fut.done():
                fut.set_result(locks)

    def _waited(self, owner: str, now: float) -> None:
        """A queued request was granted: observe how long it waited."""
        started = self._waiting_since.pop(owner, None)
        if started is not None:
            self._wait_seconds.observe(now - started[0], started[1])

    def _publish_counts(self) -> None:
        """Copy the core's counts of held locks and waiting requests into the gauges."""
        for level, counts in zip(LEVELS, self.locks.allocation.held_counts, strict=True):
            for mode, count in counts.items():
                self._held.set(count, level, mode)
        self._pending.set(self.locks.pending_count)

    def _fall_back_to_durable_locks(self, exc: StorageError) -> None:
        """A lock change could not be journalled: return to the holdings on disk.

        The change is undone by rebuilding the table from the durable holdings; every
        waiting call fails with the StorageError (its request is gone with the old table)
        so no client believes in a state the disk does not have.
        """
        log.error("journalling a lock change failed, reverting to the durable locks: %s", exc)
        self.locks = LockManager.restore(self.persistence.state.held_lists(), time.time())
        self.abandon(StorageError(f"lock state reverted after a failed write: {exc.message}"))

    def abandon(self, error: RpcError) -> None:
        """Fail every waiting call with `error` (their requests are gone)."""
        self._waiting_since.clear()
        waiting: list[asyncio.Future[Any]] = [f for calls in self._waits.values() for f in calls]
        waiting += self._opp_waits.values()
        self._waits.clear()
        self._opp_waits.clear()
        for fut in waiting:
            if not fut.done():
                fut.set_exception(error)

    def _resolve_calls(self, owner: str, result: WaitResult) -> None:
        """Answer every call waiting for `owner`'s request."""
        for fut in self._waits.pop(owner, ()):
            if not fut.done():
                fut.set_result(result)

    def settle_soon(self, effects: Effects) -> None:
        """Settle from a context that cannot wait (a dying client, a cancelled call)."""
        if effects.empty():
            self.serial.bump()  # a request stopped waiting: nothing else to do
        else:
            self.spawn(self.settle(effects))

    def spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` in the background; its failure is logged."""
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background_done)

    def _background_done(self, task: asyncio.Task[None]) -> None:
        self._background.discard(task)
        if task.cancelled() or (exc := task.exception()) is None:
            return
        if isinstance(exc, NotMaster):  # deposed meanwhile: the new master settles it
            log.info("background work left to the master: %s", exc)
        else:
            log.error("background work failed: %s", exc)

    def release_owner(self, owner: str) -> None:
        """A client died: drop its locks and pending request, wake whom it blocked."""
        self._waiting_since.pop(owner, None)
        self.settle_soon(self.locks.remove_owner(owner, now=time.time()))

    def holds_locks(self, owner: str) -> bool:
        """Whether the owner holds a lock or waits for one."""
        return bool(self.locks.list_locks(owner)) or self.locks.has_pending(owner)

    # -- methods -------------------------------------------------------------------------

    async def try_update_locks(self, client: Client, request: LockRequest) -> list[str]:
        owner = client.client_id
        update = self.locks.try_update(owner, request, now=time.time())
        await self.settle(update.effects)
        return update.blockers

    async def update_locks_waiting(
        self, client: Client, request: LockRequest, priority: int, timeout: float | None
    ) -> WaitResult:
        owner = client.client_id
        if timeout is not None and timeout < 0:
            raise InvalidParams("param `timeout`: must be >= 0 or null (wait forever)")
        now = time.time()
        if timeout == 0:
            update = self.locks.try_update(owner, request, priority, now=now)
        else:
            if owner in self._waits and self.locks.pending_matches(owner, request):
                return await self._wait(owner, timeout)  # a re-issued call
            try:
                update = self.locks.update_waiting(owner, request, priority, since=now, now=now)
            except DeadlockError:
                self._deadlocks.inc()
                raise
        level = _wait_level(request)
        waiting = None
        if update.pending:
            self._waiting_since[owner] = (time.monotonic(), level)
            if self.lock_events_wanted():
                waiting = waiting_events(owner, request, now)
        elif update.applied and level:
            self._wait_seconds.observe(0.0, level)
        await self.settle(update.effects, waiting)
        if not update.pending:
            return WaitResult(granted=update.applied, blockers=update.blockers)
        return await self._wait(owner, timeout)

    async def _wait(self, owner: str, timeout: float | None) -> WaitResult:
        """Wait for the answer to `owner`'s queued request, as one of the calls waiting
        for it: its grant, or its withdrawal (timeout, free_locks, ...).  The future is
        this call's own, so the grant wakes it directly, and a call that ends (its
        connection closed) withdraws the request only if no other call waits for it."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[WaitResult] = loop.create_future()
        self._waits.setdefault(owner, []).append(fut)
        timer = None if timeout is None else loop.call_later(timeout, self._time_out, owner, fut)
        try:
            return await fut
        except asyncio.CancelledError:
            calls = self._waits.get(owner, [])
            if fut in calls:
                calls.remove(fut)
                if not calls:
                    del self._waits[owner]
                    if self.locks.has_pending(owner):
                        self._withdraw_soon(owner)
            raise
        finally:
            if timer is not None:
                timer.cancel()

    def _time_out(self, owner: str, fut: asyncio.Future[WaitResult]) -> None:
        """A waiting call's timeout: withdraw the request it waits for, unless that was
        granted or withdrawn meanwhile (its answer is then on its way, once durable)."""
        if fut in self._waits.get(owner, ()) and self.locks.has_pending(owner):
            self._withdraw_soon(owner)

    def _withdraw_soon(self, owner: str) -> None:
        """Withdraw `owner`'s queued request.  The calls waiting for it are taken now (a
        new request of the owner's waits apart) and get granted=False with its blockers
        once what the withdrawal granted others is durable."""
        self._waiting_since.pop(owner, None)
        calls = self._waits.pop(owner, [])
        update = self.locks.withdraw(owner, now=time.time())
        answer = WaitResult(granted=False, blockers=update.blockers)
        self.spawn(self._settle_withdrawal(update.effects, calls, answer))

    async def _settle_withdrawal(
        self, effects: Effects, calls: list[asyncio.Future[WaitResult]], answer: WaitResult
    ) -> None:
        try:
            await self.settle(effects)
        finally:  # even if that write failed: the request is withdrawn all the same
            for fut in calls:
                if not fut.done():
                    fut.set_result(answer)

    async def opportunistic_lock_union(
        self, client: Client, request: LockRequest, timeout: float, min_count: int
    ) -> list[str]:
        owner = client.client_id
        if timeout < 0:
            raise InvalidParams("param `timeout`: must be >= 0")
        now = time.time()
        result = self.locks.opportunistic_lock_union(
            owner, request, min_count, wait=timeout > 0, since=now, now=now
        )
        await self.settle(result.effects)
        if not result.waiting:
            return result.locks
        fut: asyncio.Future[list[str]] = asyncio.get_running_loop().create_future()
        self._opp_waits[owner] = fut
        try:
            return await asyncio.wait_for(asyncio.shield(fut), timeout)
        except TimeoutError:
            if fut.done():
                return fut.result()
            self._opp_waits.pop(owner, None)
            finished = self.locks.finish_opportunistic(owner)
            await self.settle(finished.effects)
            return finished.locks
        except asyncio.CancelledError:
            if self._opp_waits.pop(owner, None) is fut:
                self.settle_soon(self.locks.finish_opportunistic(owner).effects)
            raise

    async def list_locks(self, client: Client) -> list[tuple[str, Mode]]:
        return self.list_locks_of(client.client_id)

    def list_locks_of(self, owner: str) -> list[tuple[str, Mode]]:
        """An owner's locks as (lock, mode) in lock order."""
        return [(lock, cast(Mode, mode)) for lock, mode in self.locks.list_locks(owner)]

    async def intersect_locks(self, client: Client, locks: list[str]) -> None:
        owner = client.client_id
        await self.settle(self.locks.intersect_locks(owner, locks, now=time.time()))

    async def free_locks(self, client: Client) -> None:
        owner = client.client_id
        await self.settle(self.locks.free_locks(owner, now=time.time()))

    async def free_locks_level(self, client: Client, level: str) -> None:
        owner = client.client_id
        await self.settle(self.locks.free_locks_level(owner, level, now=time.time()))

    async def downgrade_locks_level(self, client: Client, level: str) -> None:
        owner = client.client_id
        await self.settle(self.locks.downgrade_locks_level(owner, level, now=time.time()))

    async def wait_locks_change(self, client: Client, since_serial: int, timeout: float) -> int:
        return await self.serial.wait(since_serial, timeout)

    async def lock_waits(self, client: Client) -> list[LockWait]:
        return self.locks.lock_waits(job_of_client)

    async def list_all_locks(self, client: Client) -> AllLocks:
        view = self.locks.list_all_locks()
        return AllLocks(
            locks=[
                LockInfo(
                    name=item["name"],
                    owners=[LockOwner(o["client_id"], o["mode"]) for o in item["owners"]],
                )
                for item in view["locks"]
            ],
            pending=[
                PendingInfo(
                    client_id=p["client_id"],
                    priority=p["priority"],
                    request=[(lock, mode) for lock, mode in p["request"]],
                    since=p["since"],
                )
                for p in view["pending"]
            ],
        )
