"""The lock manager: the allocation plus waiting requests (rules 3-6 of
docs/contracts.md#lock-rules).

Pure: time and arrival are inputs, nothing here does I/O.  Arrival order is an internal
counter; the time is passed in by every call that may change holdings (`now`, keyword;
it stamps the locks it grants, for `lock_waits`) and by every call that queues a request
(`since`, for display).  The daemon shell calls one method per RPC and
acts on the returned `Effects`.

- Rule 5 (fairness): a request is not granted while a conflicting queued request ranks
  ahead of it — (priority, arrival) smaller — unless that queued request is blocked by a
  lock the asker holds.  Queued requests are granted in (priority, arrival) order.
- Rule 6 (deadlock): the wait-for graph has C -> D when C's queued request is blocked by a
  lock D holds or by D's queued request under rule 5.  Enqueueing a request that would
  close a cycle raises DeadlockError and changes nothing.  The graph can gain edges out of
  a queued request only at an enqueue (grants and opportunistic acquisitions add edges into
  owners that have no queued request), so checking there keeps it acyclic.
- Opportunistic waits are not queued requests: they block nobody and are not in the graph.

Cost: conflicts are found through indexes of held locks and of queued requests' wanted
locks, so a grant check is O(pairs + conflicting entries); after a change only the queued
requests touching the released/withdrawn locks are re-examined.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from heapq import heapify, heappop, heappush
from typing import Any

from client.api.wconfd import LockWait
from client.errors import DeadlockError, InvalidParams, PendingRequestError

from .effects import Effects, Opportunistic, Update
from .names import (
    Lock,
    Pair,
    check_priority,
    pairs_view,
    parse_level,
    parse_names,
    parse_request,
)
from .opportunistic import OppWait
from .table import Allocation, order_problem
from .wait_queue import NEW, Request, WaitQueue
from .waits import JobOf, lock_waits


def _pending_error(owner: str) -> PendingRequestError:
    """Rule 3's error."""
    return PendingRequestError(
        f"client {owner} has a waiting lock request; only free_locks, free_locks_level, "
        "downgrade_locks_level and intersect_locks are allowed until it ends"
    )


class LockManager:
    """All lock state of wconfd: held locks, queued requests, opportunistic waits."""

    __slots__ = ("_alloc", "_opp", "_pending", "_queue", "_seq")

    def __init__(self, allocation: Allocation | None = None) -> None:
        self._alloc = allocation if allocation is not None else Allocation()
        self._queue = WaitQueue(self._alloc)
        self._pending = self._queue.pending
        self._opp: dict[str, OppWait] = {}
        self._seq = 0

    # -- durability ----------------------------------------------------------------------

    @classmethod
    def restore(cls, held: Mapping[str, Any], now: float = 0.0) -> LockManager:
        """A manager holding the locks of a `held()` snapshot, nothing pending, each
        counted as granted at `now`.
        Raises table.RestoreError if the snapshot is malformed or inconsistent."""
        return cls(Allocation.restore(held, now))

    def held(self) -> dict[str, list[list[str]]]:
        """Snapshot of all held locks: {owner: [[lock, mode]]} (pending is not persisted)."""
        return self._alloc.held()

    # -- queries ---------------------------------------------------------------------------

    @property
    def allocation(self) -> Allocation:
        """The held-locks table (read it, do not mutate it)."""
        return self._alloc

    def list_locks(self, owner: str) -> list[list[str]]:
        """`list_locks`: the owner's locks as [[lock, mode]] in lock order."""
        return self._alloc.list_locks(owner)

    def list_all_locks(self) -> dict[str, Any]:
        """`list_all_locks`: held locks with owners, and pending requests (queued and
        opportunistic) in (priority, arrival) order with the `since` given at enqueue."""
        waits: list[Request | OppWait] = [*self._pending.values(), *self._opp.values()]
        waits.sort(key=lambda r: (r.priority, r.seq))
        return {
            "locks": self._alloc.list_all(),
            "pending": [
                {
                    "client_id": r.owner,
                    "priority": r.priority,
                    "request": pairs_view(r.pairs),
                    "since": r.since,
                }
                for r in waits
            ],
        }

    @property
    def pending_count(self) -> int:
        """How many requests wait: queued ones and opportunistic waits."""
        return len(self._pending) + len(self._opp)

    def owners(self) -> list[str]:
        """Every owner the core knows: holding a lock or having a pending request."""
        return sorted({*self._alloc.owned, *self._pending, *self._opp})

    def has_pending(self, owner: str) -> bool:
        """Whether `owner` has a queued request or an opportunistic wait (rule 3)."""
        return owner in self._pending or owner in self._opp

    def pending_request(self, owner: str) -> dict[str, Any] | None:
        """The owner's pending request as {"priority", "request", "since", "opportunistic"},
        or None (for list_clients)."""
        r: Request | OppWait | None = self._pending.get(owner) or self._opp.get(owner)
        if r is None:
            return None
        return {
            "priority": r.priority,
            "request": pairs_view(r.pairs),
            "since": r.since,
            "opportunistic": isinstance(r, OppWait),
        }

    def pending_matches(self, owner: str, request: Any) -> bool:
        """Whether `owner`'s queued request is exactly `request` (same pairs), so the shell
        can attach a re-issued update_locks_waiting to it instead of failing it."""
        req = self._pending.get(owner)
        if req is None:
            return False
        try:
            pairs = parse_request(request)
        except InvalidParams:
            return False
        return {(lk.name, m) for lk, m in pairs} == {(lk.name, m) for lk, m in req.pairs}

    def blockers_of(self, owner: str) -> list[str]:
        """Who blocks `owner`'s pending request now (held locks and, for queued requests,
        rule 5); [] when it has none."""
        req = self._pending.get(owner)
        if req is not None:
            return sorted(self._queue.edges(req))
        ow = self._opp.get(owner)
        if ow is None:
            return []
        missing = self._alloc.wants(owner, ow.usable)
        found = self._alloc.blockers(owner, missing)
        if self._pending:
            self._queue.add_fair_blockers(owner, missing, (ow.priority, NEW), found)
        return sorted(found)

    def lock_waits(self, job_of: JobOf) -> list[LockWait]:
        """`lock_waits`: per waiting request, in (priority, arrival) order, one entry per
        lock it still wants that someone holds in a conflicting mode (waits.lock_waits).
        `job_of` names the job of a client id (None for a client that is no job)."""
        waits: list[Request | OppWait] = [*self._pending.values(), *self._opp.values()]
        waits.sort(key=lambda r: (r.priority, r.seq))
        alloc = self._alloc
        waiting = [
            (
                r.owner,
                r.wants if isinstance(r, Request) else alloc.wants(r.owner, r.usable),
                float(r.since or 0.0),
            )
            for r in waits
        ]
        return lock_waits(alloc, waiting, job_of)

    def wait_for_graph(self) -> dict[str, list[str]]:
        """The wait-for graph of rule 6: queued owner -> sorted owners it waits for."""
        return self._queue.graph()

    # -- lock requests -------------------------------------------------------------------

    def try_update(
        self, owner: str, request: Any, priority: int = 0, *, now: float = 0.0
    ) -> Update:
        """`try_update_locks`: apply `request` atomically now, or change nothing and return
        the blockers (held locks, and rule 5's earlier conflicting waiters)."""
        pairs, _, found = self._checked(owner, request, priority)
        if found:
            return Update(applied=False, pending=False, blockers=sorted(found), effects=Effects())
        return self._apply_now(owner, pairs, now)

    def update_waiting(
        self, owner: str, request: Any, priority: int = 0, since: Any = None, *, now: float = 0.0
    ) -> Update:
        """`update_locks_waiting`: like try_update, but a blocked request is queued
        (pending=True) and granted later by some operation's `Effects.granted`.
        DeadlockError (nothing changed) if queueing it would close a wait-for cycle."""
        pairs, wants, found = self._checked(owner, request, priority)
        if found:
            req = Request(owner, pairs, wants, priority, self._seq + 1, since)
            self._queue.enqueue(req)
            cycle = self._queue.cycle_through(owner)
            if cycle is not None:
                self._queue.dequeue(req)
                raise DeadlockError(
                    "waiting would close a cycle in the wait-for graph: " + " -> ".join(cycle),
                    {"cycle": cycle},
                )
            self._seq += 1
            return Update(applied=False, pending=True, blockers=sorted(found), effects=Effects())
        return self._apply_now(owner, pairs, now)

    def withdraw(self, owner: str, *, now: float = 0.0) -> Update:
        """Drop `owner`'s pending request (timeout, connection closed); `blockers` are who
        blocked it.  Its removal may let others be granted (see effects)."""
        eff = Effects()
        req = self._pending.get(owner)
        if req is not None:
            found = sorted(self._queue.edges(req))
            self._queue.dequeue(req)
            self._settle(eff, (), req.wants, now)
            return Update(applied=False, pending=False, blockers=found, effects=eff)
        if owner in self._opp:
            found = self.blockers_of(owner)
            del self._opp[owner]
            return Update(applied=False, pending=False, blockers=found, effects=eff)
        return Update(applied=False, pending=False, blockers=[], effects=eff)

    def set_priority(self, owner: str, priority: int, *, now: float = 0.0) -> Effects:
        """Change the priority of `owner`'s pending request (change_job_priority).
        DeadlockError (nothing changed) if the new rank would close a wait-for cycle."""
        check_priority(priority)
        eff = Effects()
        req = self._pending.get(owner)
        if req is None:
            ow = self._opp.get(owner)
            if ow is not None and ow.priority != priority:
                ow.priority = priority
                self._extend_opportunistic(eff, now)
            return eff
        if req.priority == priority:
            return eff
        old, req.priority = req.priority, priority
        cycle = self._queue.cycle_through(owner)
        if cycle is not None:
            req.priority = old
            raise DeadlockError(
                "the new priority would close a cycle in the wait-for graph: " + " -> ".join(cycle),
                {"cycle": cycle},
            )
        self._settle(eff, (), req.wants, now)
        return eff

    # -- releases (each first withdraws the owner's pending request) -------------------------

    def free_locks(self, owner: str, *, now: float = 0.0) -> Effects:
        """`free_locks`: release everything `owner` holds."""
        return self._owner_change(owner, lambda w: self._alloc.release_where(owner, _all, w), now)

    def free_locks_level(self, owner: str, level: str, *, now: float = 0.0) -> Effects:
        """`free_locks_level`: release `owner`'s locks (lockset and members) at `level`."""
        lvl = parse_level(level)
        return self._owner_change(
            owner, lambda w: self._alloc.release_where(owner, lambda lk: lk.level == lvl, w), now
        )

    def downgrade_locks_level(self, owner: str, level: str, *, now: float = 0.0) -> Effects:
        """`downgrade_locks_level`: exclusive -> shared for `owner`'s locks at `level`."""
        lvl = parse_level(level)
        return self._owner_change(
            owner, lambda w: self._alloc.downgrade_level(owner, lvl, w, now), now
        )

    def intersect_locks(self, owner: str, locks: Any, *, now: float = 0.0) -> Effects:
        """`intersect_locks`: keep only these of `owner`'s locks."""
        keep = {lk.name for lk in parse_names(locks)}
        return self._owner_change(
            owner,
            lambda w: self._alloc.release_where(owner, lambda lk: lk.name not in keep, w),
            now,
        )

    def remove_owner(self, owner: str, *, now: float = 0.0) -> Effects:
        """Death of `owner`: drop its pending request and all its locks."""
        return self.free_locks(owner, now=now)

    # -- opportunistic union ------------------------------------------------------------------

    def opportunistic_lock_union(
        self,
        owner: str,
        request: Any,
        min_count: int = 0,
        *,
        priority: int = 0,
        wait: bool = False,
        since: Any = None,
        now: float = 0.0,
    ) -> Opportunistic:
        """`opportunistic_lock_union`: acquire now every pair (shared/exclusive only)
        that is free — no conflict, no earlier conflicting waiter (rule 5) — and passes the
        order rule against the locks held before the call (others are skipped, never an
        error); all or none of them if fewer than `min_count` of the request would be held.

        `wait` (the shell's timeout > 0): if some pairs are still missing, register a wait
        that later operations extend; its end is reported in `Effects.opportunistic`, or
        the shell calls finish_opportunistic at its timeout.
        """
        pairs = parse_request(request, allow_release=False)
        if type(min_count) is not int or min_count < 0:
            raise InvalidParams(f"min_count must be a non-negative integer, got {min_count!r}")
        check_priority(priority)
        if owner in self._pending or owner in self._opp:
            raise _pending_error(owner)
        alloc = self._alloc
        mine = alloc.owned.get(owner)
        top = alloc.top(owner)
        if mine and top is not None:
            usable = [p for p in pairs if order_problem(mine, top, p[0], p[1]) is None]
        else:
            usable = list(pairs)
        pairs.sort(key=lambda p: p[0].key)
        ow = OppWait(owner, pairs, usable, min_count, priority, self._seq + 1, since)
        eff = Effects()
        done = self._opp_step(ow, eff, now)
        if wait and not done:
            self._seq += 1
            self._opp[owner] = ow
            return Opportunistic(locks=ow.result(self._alloc.owned), waiting=True, effects=eff)
        return Opportunistic(locks=ow.result(self._alloc.owned), waiting=False, effects=eff)

    def finish_opportunistic(self, owner: str) -> Opportunistic:
        """End `owner`'s opportunistic wait (its timeout passed): the locks it holds from
        the request ([] if fewer than min_count; then none were acquired by it)."""
        ow = self._opp.pop(owner, None)
        if ow is None:
            return Opportunistic(locks=[], waiting=False, effects=Effects())
        return Opportunistic(locks=ow.result(self._alloc.owned), waiting=False, effects=Effects())

    # -- internals -------------------------------------------------------------------------

    def _checked(
        self, owner: str, request: Any, priority: int
    ) -> tuple[list[Pair], list[Pair], set[str]]:
        """Validate a request (rules 1-4) and find who blocks it now: its pairs, the ones
        that strengthen what `owner` holds, and the blockers (held locks and rule 5)."""
        pairs = parse_request(request)
        check_priority(priority)
        if owner in self._pending or owner in self._opp:
            raise _pending_error(owner)
        alloc = self._alloc
        alloc.check_order(owner, pairs)
        wants = alloc.wants(owner, pairs)
        found: set[str] = set()
        if wants:
            found = alloc.blockers(owner, wants)
            if self._pending:
                self._queue.add_fair_blockers(owner, wants, (priority, NEW), found)
        return pairs, wants, found

    def _apply_now(self, owner: str, pairs: list[Pair], now: float) -> Update:
        """Apply an unblocked request and settle the queue if it released anything."""
        weakened: list[Lock] = []
        eff = Effects()
        changes = self._alloc.apply(owner, pairs, weakened, now)
        if changes:
            eff.changes[owner] = changes
            if weakened and (self._pending or self._opp):
                self._settle(eff, weakened, (), now)
        return Update(applied=True, pending=False, blockers=[], effects=eff)

    def _owner_change(
        self, owner: str, change: Callable[[list[Lock]], list[tuple[str, str]]], now: float
    ) -> Effects:
        """Withdraw the owner's pending request, run `change`, settle the queue."""
        eff = Effects()
        removed: Iterable[Pair] = ()
        req = self._pending.get(owner)
        if req is not None:
            eff.withdrawn[owner] = sorted(self._queue.edges(req))
            self._queue.dequeue(req)
            removed = req.wants
        ow = self._opp.pop(owner, None)
        weakened: list[Lock] = []
        eff.add_changes(owner, change(weakened))
        if weakened or req is not None:
            self._settle(eff, weakened, removed, now)
        if ow is not None:
            eff.opportunistic[owner] = ow.result(self._alloc.owned)
        return eff

    def _settle(
        self, eff: Effects, weakened: Iterable[Lock], removed: Iterable[Pair], now: float
    ) -> None:
        """Grant, in (priority, arrival) order, every queued request that the released or
        downgraded locks `weakened`, or the withdrawn/granted wants `removed`, may have
        unblocked — transitively, stamped `now`; then extend opportunistic waits."""
        pending = self._pending
        if pending:
            touched: set[str] = set()
            interacting = self._queue.index.add_interacting
            for lock in weakened:
                interacting(lock, touched)
            for lock, _mode in removed:
                interacting(lock, touched)
            heap = [(pending[o].priority, pending[o].seq, o) for o in touched]
            heapify(heap)
            queued = touched
            alloc = self._alloc
            while heap:
                _prio, _seq, owner = heappop(heap)
                queued.discard(owner)
                req = pending.get(owner)
                if req is None or not self._queue.grantable(req):
                    continue
                self._queue.dequeue(req)
                released: list[Lock] = []
                eff.add_changes(owner, alloc.apply(owner, req.pairs, released, now))
                eff.granted.append(owner)
                more: set[str] = set()
                for lock in released:
                    interacting(lock, more)
                for lock, _mode in req.wants:
                    interacting(lock, more)
                for other in more - queued:
                    queued.add(other)
                    r = pending[other]
                    heappush(heap, (r.priority, r.seq, other))
        if self._opp:
            self._extend_opportunistic(eff, now)

    def _extend_opportunistic(self, eff: Effects, now: float) -> None:
        """Acquire what has become free for each opportunistic wait, oldest first; report
        and drop those that are complete."""
        for owner, ow in sorted(self._opp.items(), key=lambda item: item[1].seq):
            if self._opp_step(ow, eff, now):
                del self._opp[owner]
                eff.opportunistic[owner] = ow.result(self._alloc.owned)

    def _opp_step(self, ow: OppWait, eff: Effects, now: float) -> bool:
        """Acquire the free usable pairs of `ow` (if min_count allows); True when no usable
        pair is missing any more."""
        alloc = self._alloc
        owner = ow.owner
        missing = alloc.wants(owner, ow.usable)
        if not missing:
            return True
        if ow.min_count and ow.count_held(self._alloc.owned) + len(missing) < ow.min_count:
            return True  # min_count can never be reached: give up (nothing was acquired)
        free: list[Pair] = []
        any_conflict = alloc.index.any_conflict
        for pair in missing:
            if any_conflict(owner, pair[0], pair[1]):
                continue
            if self._pending and self._queue.has_fair_blocker(owner, (pair,), (ow.priority, NEW)):
                continue
            free.append(pair)
        if not free:
            return False
        if ow.min_count and ow.count_held(self._alloc.owned) + len(free) < ow.min_count:
            return False
        eff.add_changes(owner, alloc.apply(owner, free, [], now))
        return len(free) == len(missing)


def _all(_lock: Lock) -> bool:
    """Predicate selecting every lock."""
    return True
