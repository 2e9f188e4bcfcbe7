"""The queue of waiting lock requests: who ranks ahead (rule 5 of
docs/contracts.md#lock-rules) and who waits for whom (rule 6).  Pure; the LockManager
(manager.py) owns one and decides when to queue, grant and withdraw.

- Rule 5 (fairness): a request is not granted while a conflicting queued request ranks
  ahead of it — (priority, arrival) smaller — unless that queued request is blocked by a
  lock the asker holds.
- Rule 6 (deadlock): the wait-for graph has C -> D when C's queued request is blocked by
  a lock D holds or by D's queued request under rule 5.

Conflicts with queued requests are found through an index of their wanted (strengthening)
pairs, like the held-locks index, so a check costs O(pairs + conflicting entries).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .names import Pair
from .table import Allocation, HolderIndex

NEW = sys.maxsize
"""Arrival rank of a request not yet queued: behind every queued one."""


@dataclass(slots=True)
class Request:
    """A queued waiting request.  `wants` are its acquire/upgrade pairs (the owner's
    holdings cannot change while it waits, so they are computed once)."""

    owner: str
    pairs: list[Pair]
    wants: list[Pair]
    priority: int
    seq: int
    since: Any


class WaitQueue:
    """Queued requests by owner, their wanted-pairs index, over the held locks `alloc`."""

    __slots__ = ("alloc", "index", "pending")

    def __init__(self, alloc: Allocation) -> None:
        self.alloc = alloc
        self.pending: dict[str, Request] = {}
        self.index = HolderIndex()
        """Index of the queued requests' wanted (strengthening) pairs."""

    def enqueue(self, req: Request) -> None:
        """Queue `req` and index its wanted pairs."""
        self.pending[req.owner] = req
        add = self.index.add
        for lock, mode in req.wants:
            add(req.owner, lock, mode)

    def dequeue(self, req: Request) -> None:
        """Unqueue `req` and its index entries."""
        del self.pending[req.owner]
        remove = self.index.remove
        for lock, mode in req.wants:
            remove(req.owner, lock, mode)

    def _ahead(self, owner: str, wants: Iterable[Pair], rank: tuple[int, int]) -> Iterable[str]:
        """Owners of queued requests ranked before `rank` that conflict with `wants` and
        are not blocked by a lock `owner` holds (rule 5), lazily."""
        cands: set[str] = set()
        add = self.index.add_conflicts
        for lock, mode in wants:
            add(lock, mode, cands)
        cands.discard(owner)
        pending = self.pending
        blocked_by = self.alloc.blocked_by
        for other in cands:
            req = pending[other]
            if (req.priority, req.seq) < rank and not blocked_by(owner, req.wants):
                yield other

    def add_fair_blockers(
        self, owner: str, wants: Iterable[Pair], rank: tuple[int, int], out: set[str]
    ) -> None:
        """Rule 5: add to `out` the queued owners that hold back `wants` ranked at `rank`."""
        out.update(self._ahead(owner, wants, rank))

    def has_fair_blocker(self, owner: str, wants: Iterable[Pair], rank: tuple[int, int]) -> bool:
        """Whether rule 5 holds back `wants` of `owner` ranked at `rank` (early exit)."""
        return next(iter(self._ahead(owner, wants, rank)), None) is not None

    def edges(self, req: Request) -> set[str]:
        """Out-edges of a queued request in the wait-for graph = its current blockers."""
        found = self.alloc.blockers(req.owner, req.wants)
        self.add_fair_blockers(req.owner, req.wants, (req.priority, req.seq), found)
        return found

    def grantable(self, req: Request) -> bool:
        """Whether a queued request has no blocker at all (cheap: no blocker sets built)."""
        if self.alloc.is_blocked(req.owner, req.wants):
            return False
        return not self.has_fair_blocker(req.owner, req.wants, (req.priority, req.seq))

    def graph(self) -> dict[str, list[str]]:
        """The wait-for graph of rule 6: queued owner -> sorted owners it waits for."""
        return {owner: sorted(self.edges(req)) for owner, req in self.pending.items()}

    def cycle_through(self, start: str) -> list[str] | None:
        """A wait-for cycle start -> ... -> start, or None (depth-first, deterministic)."""
        pending = self.pending
        path = [start]
        stack = [iter(sorted(self.edges(pending[start])))]
        seen = {start}
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                stack.pop()
                path.pop()
                continue
            if nxt == start:
                return [*path, start]
            if nxt in seen:
                continue
            seen.add(nxt)
            req = pending.get(nxt)
            if req is None:
                continue  # holds locks but waits for nothing: a sink
            path.append(nxt)
            stack.append(iter(sorted(self.edges(req))))
        return None
