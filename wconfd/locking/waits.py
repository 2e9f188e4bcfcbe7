"""Who waits for which lock, and who holds it since when: `lock_waits`
(docs/contracts.md#why-a-job-waits), what luxid's `why_job` follows from job to job.

Pure: read from the allocation (held locks with their grant times) and the waiting
requests as the LockManager keeps them; nothing is changed.  A waiting request gives one
entry per lock it wants that some other owner holds in a conflicting mode (the lock
itself, its level's lockset, or for a lockset the members of its level); a lock held back
only by rule 5 (an earlier waiting request, not a holder) gives none, since nobody holds
it.  Each holder is reported once per entry, with the strongest mode it holds among its
conflicting entries and the earliest time it was granted that mode.

Cost: O(waiting requests x their wanted pairs x conflicting holders); the held locks
that conflict with nobody waiting are never looked at.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import cast

from client.api.wconfd import LockHolder, LockWait
from client.vocabulary import EXCLUSIVE, SHARED, Mode

from .names import Lock, Pair, parse_lock
from .table import Allocation

JobOf = Callable[[str], int | None]
"""The job id in a client id (None for a client that is no job)."""

Waiting = tuple[str, Sequence[Pair], float]
"""A waiting request: its owner, the pairs it still wants, and since when it waits."""


def lock_waits(alloc: Allocation, waiting: Iterable[Waiting], job_of: JobOf) -> list[LockWait]:
    """One LockWait per blocked lock of each waiting request, in the order given (the
    requests) and lock order (their locks); holders sorted by client id."""
    out: list[LockWait] = []
    for owner, wants, since in waiting:
        job_id = job_of(owner)
        for lock, mode in sorted(wants, key=lambda pair: pair[0].key):
            holders = _holders(alloc, owner, lock, mode, job_of)
            if holders:
                out.append(LockWait(owner, job_id, lock.name, cast(Mode, mode), since, holders))
    return out


def _holders(
    alloc: Allocation, owner: str, lock: Lock, mode: str, job_of: JobOf
) -> list[LockHolder]:
    """The owners other than `owner` whose held locks conflict with (lock, mode)."""
    found: set[str] = set()
    alloc.index.add_conflicts(lock, mode, found)
    found.discard(owner)
    holders = []
    for other in sorted(found):
        held_mode, held_since = _strongest(alloc, other, _conflicting(alloc, other, lock, mode))
        holders.append(LockHolder(other, job_of(other), held_mode, held_since))
    return holders


def _conflicting(alloc: Allocation, other: str, lock: Lock, mode: str) -> list[str]:
    """The names of `other`'s held locks that conflict with (lock, mode) asked by someone
    else: the lock itself, the lockset over a member, the members under a lockset."""
    mine = alloc.owned.get(other, {})
    if lock.is_set:
        names = [name for name in mine if parse_lock(name).level == lock.level]
    else:
        names = [name for name in (lock.name, lock.lockset) if name in mine]
    return [name for name in names if mode == EXCLUSIVE or mine[name] == EXCLUSIVE]


def _strongest(alloc: Allocation, other: str, names: Sequence[str]) -> tuple[Mode, float]:
    """The strongest mode among `other`'s locks `names` and the earliest grant in it."""
    mine = alloc.owned[other]
    best: Mode = EXCLUSIVE if any(mine[name] == EXCLUSIVE for name in names) else SHARED
    return best, min(alloc.since_of(other, name) for name in names if mine[name] == best)
