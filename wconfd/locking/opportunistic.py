"""An opportunistic union that waits (docs/contracts.md#lock-operations): what it asked
for, and what of it its owner holds.  Pure; the lock manager keeps one per waiting owner
and extends it after every change."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .names import EXCLUSIVE, Pair


@dataclass(slots=True)
class OppWait:
    """A pending opportunistic union: `usable` are the pairs that pass the order rule
    against the locks held before the call; they are acquired as they become free."""

    owner: str
    pairs: list[Pair]
    usable: list[Pair]
    min_count: int
    priority: int
    seq: int
    since: Any

    def held(self, owned: Mapping[str, Mapping[str, str]]) -> list[str]:
        """The request's locks its owner holds at least as strongly, in lock order."""
        mine = owned.get(self.owner) or {}
        locks = []
        for lock, mode in self.pairs:
            cur = mine.get(lock.name)
            if cur is not None and (cur == EXCLUSIVE or mode != EXCLUSIVE):
                locks.append(lock.name)
        return locks

    def count_held(self, owned: Mapping[str, Mapping[str, str]]) -> int:
        """How many of the request's pairs the owner holds at least as strongly."""
        return len(self.held(owned))

    def result(self, owned: Mapping[str, Mapping[str, str]]) -> list[str]:
        """What the union answers: the locks held from it; [] if fewer than min_count."""
        locks = self.held(owned)
        return locks if len(locks) >= self.min_count else []
