"""The lock allocation: who holds what, conflicts (docs/contracts.md#lock-conflicts), the
order rule (rule 2 of docs/contracts.md#lock-rules) and the atomic update with blockers —
Ganeti's Locking/Allocation.hs, without waiting.

Pure: no I/O, no clock: the time a change is made is passed in (`now`), and each held
lock keeps the time it was granted in its current mode (`since`, for `lock_waits`).
State is mutated in place, but every operation checks first and
applies after, so an operation that raises or is blocked leaves the state unchanged.
Indexes (holders per lock, member counts per level and owner) make a conflict check cost
O(pairs + answer), independent of how many locks and owners the table holds.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Collection, Iterable, Mapping
from typing import Any

from client.errors import InvalidParams, LockOrderError
from client.vocabulary import EXCLUSIVE, LEVELS, ORDER_HINT, RELEASE, SHARED, LockKey

from .names import Lock, Pair, parse_lock, parse_request


class RestoreError(ValueError):
    """A held-locks snapshot is malformed or inconsistent (two owners in conflict)."""


class HolderIndex:
    """Entries (owner, lock, mode) indexed for conflict queries.

    Used twice: for the locks owners hold, and for the strengthening pairs of waiting
    requests (to find the conflicting waiters of rule 5 without scanning the queue).
    """

    __slots__ = ("excl", "holders", "lvl_any", "lvl_excl")

    def __init__(self) -> None:
        self.holders: dict[str, dict[str, str]] = {}
        """lock name -> {owner: mode}."""
        self.excl: dict[str, set[str]] = {}
        """lock name -> owners with an exclusive entry (absent when none)."""
        self.lvl_any: list[dict[str, int]] = [{} for _ in LEVELS]
        """level -> {owner: number of member (non-lockset) entries}."""
        self.lvl_excl: list[dict[str, int]] = [{} for _ in LEVELS]
        """level -> {owner: number of exclusive member entries}."""

    def add(self, owner: str, lock: Lock, mode: str) -> None:
        """Record that `owner` holds/wants `lock` in `mode` (it had no entry for it)."""
        name = lock.name
        holders = self.holders.get(name)
        if holders is None:
            self.holders[name] = {owner: mode}
        else:
            holders[owner] = mode
        excl = mode == EXCLUSIVE
        if excl:
            owners = self.excl.get(name)
            if owners is None:
                self.excl[name] = {owner}
            else:
                owners.add(owner)
        if not lock.is_set:
            counts = self.lvl_any[lock.level]
            counts[owner] = counts.get(owner, 0) + 1
            if excl:
                counts = self.lvl_excl[lock.level]
                counts[owner] = counts.get(owner, 0) + 1

    def remove(self, owner: str, lock: Lock, mode: str) -> None:
        """Drop `owner`'s entry for `lock`, which is in `mode`."""
        name = lock.name
        holders = self.holders[name]
        del holders[owner]
        if not holders:
            del self.holders[name]
        excl = mode == EXCLUSIVE
        if excl:
            owners = self.excl[name]
            owners.discard(owner)
            if not owners:
                del self.excl[name]
        if not lock.is_set:
            _decrement(self.lvl_any[lock.level], owner)
            if excl:
                _decrement(self.lvl_excl[lock.level], owner)

    def _conflicting_index(self, mode: str) -> tuple[Any, Any]:
        """The per-lock and per-level indexes of the entries `mode` conflicts with:
        exclusive conflicts with any entry, shared only with exclusive ones."""
        if mode == EXCLUSIVE:
            return self.holders, self.lvl_any
        return self.excl, self.lvl_excl

    def add_conflicts(self, lock: Lock, mode: str, out: set[str]) -> None:
        """Add to `out` every owner with an entry conflicting with (lock, mode).

        The asker itself may be added too (it never conflicts with itself): callers discard
        it once after collecting all pairs.
        """
        by_name, by_level = self._conflicting_index(mode)
        owners = by_name.get(lock.name)
        if owners:
            out.update(owners)
        if lock.is_set:
            out.update(by_level[lock.level])
        else:
            owners = by_name.get(lock.lockset)
            if owners:
                out.update(owners)

    def any_conflict(self, owner: str, lock: Lock, mode: str) -> bool:
        """Whether any owner other than `owner` has an entry conflicting with (lock, mode).
        O(1): only the sizes of the index entries are looked at."""
        by_name, by_level = self._conflicting_index(mode)
        if _others(by_name.get(lock.name), owner):
            return True
        if lock.is_set:
            return _others(by_level[lock.level], owner)
        return _others(by_name.get(lock.lockset), owner)

    def conflicts_with(self, other: str, lock: Lock, mode: str) -> bool:
        """Whether `other`'s entries conflict with (lock, mode) asked by someone else."""
        holders = self.holders.get(lock.name)
        if holders is not None:
            held = holders.get(other)
            if held is not None and (mode == EXCLUSIVE or held == EXCLUSIVE):
                return True
        if lock.is_set:
            counts = self.lvl_any if mode == EXCLUSIVE else self.lvl_excl
            return other in counts[lock.level]
        holders = self.holders.get(lock.lockset)
        if holders is not None:
            held = holders.get(other)
            if held is not None and (mode == EXCLUSIVE or held == EXCLUSIVE):
                return True
        return False

    def add_interacting(self, lock: Lock, out: set[str]) -> None:
        """Add every owner with an entry that *could* conflict with some mode on `lock`
        (same lock, the lockset of a member, the members of a lockset's level)."""
        holders = self.holders.get(lock.name)
        if holders:
            out.update(holders)
        if lock.is_set:
            out.update(self.lvl_any[lock.level])
        else:
            holders = self.holders.get(lock.lockset)
            if holders:
                out.update(holders)


def _others(entries: Collection[str] | None, owner: str) -> bool:
    """Whether `entries` (owners of an index entry) holds someone besides `owner`."""
    if not entries:
        return False
    return len(entries) > 1 or owner not in entries


def _decrement(counts: dict[str, int], owner: str) -> None:
    """Decrease a per-owner count, dropping the key at zero."""
    n = counts[owner] - 1
    if n:
        counts[owner] = n
    else:
        del counts[owner]


def _key_name(key: LockKey) -> str:
    """The lock name of an order key."""
    return f"{LEVELS[key[0]]}/{key[2]}"


def order_problem(mine: Mapping[str, str], top: LockKey, lock: Lock, mode: str) -> str | None:
    """Why acquiring (lock, mode) breaks rule 2 for an owner holding `mine` (greatest lock
    `top`), or None if it does not.  `mode` is shared or exclusive."""
    cur = mine.get(lock.name)
    if cur is not None and (cur == EXCLUSIVE or mode == SHARED):
        return None  # already held that strongly: a no-op or a downgrade
    if not lock.is_set:
        set_mode = mine.get(lock.lockset)
        if set_mode is not None:
            if mode == EXCLUSIVE and set_mode == SHARED:
                return (
                    f"requesting {lock.name} exclusive while holding {lock.lockset} shared; "
                    f"acquire locks in order ({ORDER_HINT}) with the lockset exclusive"
                )
            return None  # covered by the lockset held strongly enough
    if lock.key < top:
        return (
            f"requesting {lock.name} while holding {_key_name(top)}; "
            f"acquire locks in order ({ORDER_HINT})"
        )
    return None


class Allocation:
    """Held locks of every owner with conflict indexes; Ganeti's LockAllocation."""

    __slots__ = ("_keys", "held_counts", "index", "owned", "since")

    def __init__(self) -> None:
        self.owned: dict[str, dict[str, str]] = {}
        """owner -> {lock name: mode}; owners holding nothing are absent."""
        self.since: dict[str, dict[str, float]] = {}
        """owner -> {lock name: when it was granted in its current mode} (the `now` of the
        change that acquired, upgraded or downgraded it); the same keys as `owned`."""
        self.index = HolderIndex()
        self.held_counts: list[dict[str, int]] = [{SHARED: 0, EXCLUSIVE: 0} for _ in LEVELS]
        """level -> {mode: number of held entries}: the metrics' locks_held, kept here."""
        self._keys: dict[str, list[LockKey]] = {}
        """owner -> the order keys of its held locks, sorted: the greatest is its top,
        kept in O(log n) per change so the order check never rescans the holdings."""

    # -- queries -----------------------------------------------------------------------

    def since_of(self, owner: str, name: str) -> float:
        """When `owner` was granted lock `name` in the mode it holds it (it holds it)."""
        return self.since[owner][name]

    def mode_of(self, owner: str, name: str) -> str | None:
        """The mode in which `owner` holds lock `name`, or None."""
        mine = self.owned.get(owner)
        return mine.get(name) if mine is not None else None

    def top(self, owner: str) -> LockKey | None:
        """The order key of the greatest lock `owner` holds (None if it holds none)."""
        keys = self._keys.get(owner)
        return keys[-1] if keys else None

    def check_order(self, owner: str, pairs: Iterable[Pair]) -> None:
        """Rule 2 against what `owner` holds now; LockOrderError on the first violation."""
        mine = self.owned.get(owner)
        if not mine:
            return
        top = self.top(owner)
        assert top is not None
        for lock, mode in pairs:
            if mode != RELEASE:
                problem = order_problem(mine, top, lock, mode)
                if problem is not None:
                    raise LockOrderError(problem, {"lock": lock.name})

    def wants(self, owner: str, pairs: Iterable[Pair]) -> list[Pair]:
        """The pairs that strengthen `owner`'s holdings (acquires and upgrades): the only
        ones that can conflict with anybody."""
        mine = self.owned.get(owner)
        if mine is None:
            return [pair for pair in pairs if pair[1] != RELEASE]
        out = []
        for pair in pairs:
            mode = pair[1]
            if mode == RELEASE:
                continue
            cur = mine.get(pair[0].name)
            if cur is None or (cur == SHARED and mode == EXCLUSIVE):
                out.append(pair)
        return out

    def blockers(self, owner: str, wants: Iterable[Pair]) -> set[str]:
        """Other owners whose held locks conflict with `wants`."""
        out: set[str] = set()
        add = self.index.add_conflicts
        for lock, mode in wants:
            add(lock, mode, out)
        out.discard(owner)
        return out

    def is_blocked(self, owner: str, wants: Iterable[Pair]) -> bool:
        """Whether anybody else's held locks conflict with `wants` (early exit, O(pairs))."""
        any_conflict = self.index.any_conflict
        return any(any_conflict(owner, lock, mode) for lock, mode in wants)

    def blocked_by(self, other: str, wants: Iterable[Pair]) -> bool:
        """Whether a lock `other` holds conflicts with `wants` (of someone else)."""
        if other not in self.owned:
            return False
        conflicts_with = self.index.conflicts_with
        return any(conflicts_with(other, lock, mode) for lock, mode in wants)

    def list_locks(self, owner: str) -> list[list[str]]:
        """`owner`'s locks as [[lock, mode]] in lock order."""
        mine = self.owned.get(owner)
        if not mine:
            return []
        return [[name, mine[name]] for name in sorted(mine, key=_name_key)]

    def held(self) -> dict[str, list[list[str]]]:
        """Snapshot for durability: {owner: [[lock, mode]]}, owners sorted, locks in order."""
        return {owner: self.list_locks(owner) for owner in sorted(self.owned)}

    def list_all(self) -> list[dict[str, Any]]:
        """Every held lock in lock order with its owners (sorted by client id)."""
        holders = self.index.holders
        return [
            {
                "name": name,
                "owners": [
                    {"client_id": owner, "mode": holders[name][owner]}
                    for owner in sorted(holders[name])
                ],
            }
            for name in sorted(holders, key=_name_key)
        ]

    # -- changes -----------------------------------------------------------------------

    def try_update(self, owner: str, request: Any, now: float = 0.0) -> list[str]:
        """Ganeti's `updateLocks` on its own (no waiting queue): validate, check the order,
        apply atomically if nobody blocks; return the sorted blockers ([] = applied)."""
        pairs = parse_request(request)
        self.check_order(owner, pairs)
        found = self.blockers(owner, self.wants(owner, pairs))
        if found:
            return sorted(found)
        self.apply(owner, pairs, [], now)
        return []

    def apply(
        self, owner: str, pairs: Iterable[Pair], weakened: list[Lock], now: float = 0.0
    ) -> list[tuple[str, str]]:
        """Apply checked, unblocked pairs; append released/downgraded locks to `weakened`.
        Locks acquired or changed in mode are stamped `now`.  Returns the (lock name, mode
        or "release") pairs that changed `owner`'s holdings, in order ([] if none did): the
        journal's record of this change."""
        mine = self.owned.get(owner)
        stamps = self.since.get(owner)
        index = self.index
        changed: list[tuple[str, str]] = []
        for lock, mode in pairs:
            name = lock.name
            cur = mine.get(name) if mine is not None else None
            counts = self.held_counts[lock.level]
            if cur is not None and cur != mode:
                counts[cur] -= 1
            if mode == RELEASE:
                if cur is None:
                    continue
                assert mine is not None and stamps is not None
                del mine[name]
                del stamps[name]
                index.remove(owner, lock, cur)
                weakened.append(lock)
                keys = self._keys[owner]
                del keys[bisect_left(keys, lock.key)]
            elif cur is None:
                if mine is None or stamps is None:
                    mine = self.owned[owner] = {}
                    stamps = self.since[owner] = {}
                    self._keys[owner] = [lock.key]
                else:
                    insort(self._keys[owner], lock.key)
                mine[name] = mode
                stamps[name] = now
                index.add(owner, lock, mode)
                counts[mode] += 1
            elif cur != mode:
                assert mine is not None and stamps is not None
                counts[mode] += 1
                mine[name] = mode
                stamps[name] = now
                index.remove(owner, lock, cur)
                index.add(owner, lock, mode)
                if mode == SHARED:
                    weakened.append(lock)
            else:
                continue
            changed.append((name, mode))
        if mine is not None and not mine:
            del self.owned[owner]
            del self.since[owner]
            del self._keys[owner]
        return changed

    def release_where(
        self, owner: str, drop: Callable[[Lock], bool], weakened: list[Lock]
    ) -> list[tuple[str, str]]:
        """Release every lock of `owner` for which `drop(lock)` is true; the changed pairs."""
        mine = self.owned.get(owner)
        if not mine:
            return []
        pairs = [(lock, RELEASE) for lock in map(parse_lock, mine) if drop(lock)]
        return self.apply(owner, pairs, weakened)

    def downgrade_level(
        self, owner: str, level: int, weakened: list[Lock], now: float = 0.0
    ) -> list[tuple[str, str]]:
        """Exclusive -> shared for each of `owner`'s locks at `level`; the changed pairs."""
        mine = self.owned.get(owner)
        if not mine:
            return []
        pairs = [
            (lock, SHARED)
            for lock, mode in ((parse_lock(name), mode) for name, mode in mine.items())
            if lock.level == level and mode == EXCLUSIVE
        ]
        return self.apply(owner, pairs, weakened, now)

    @classmethod
    def restore(cls, held: Mapping[str, Any], now: float = 0.0) -> Allocation:
        """Rebuild from a `held()` snapshot; RestoreError if malformed or in conflict.
        The snapshot keeps no grant times: every lock counts as granted at `now`."""
        alloc = cls()
        if not isinstance(held, Mapping):
            raise RestoreError(f"held locks must be a mapping, got {type(held).__name__}")
        for owner, locks in held.items():
            if not isinstance(owner, str) or not owner:
                raise RestoreError(f"bad owner id {owner!r}")
            try:
                pairs = parse_request(locks, allow_release=False, what=f"held[{owner!r}]")
            except InvalidParams as exc:
                raise RestoreError(exc.message) from None
            found = alloc.blockers(owner, pairs)
            if found:
                raise RestoreError(
                    f"inconsistent lock state: {owner!r} conflicts with {sorted(found)}"
                )
            alloc.apply(owner, pairs, [], now)
        return alloc


def _name_key(name: str) -> LockKey:
    """Sort key of a (known valid) lock name."""
    return parse_lock(name).key
