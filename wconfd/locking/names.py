"""Lock names parsed for the lock core, and the total lock order
(docs/contracts.md#lock-names-and-order, docs/contracts.md#lock-conflicts).

The vocabulary itself (levels, modes, BGL, priorities) is `client.vocabulary`'s; this module
parses names into `Lock` values for the hot path.

Pure and allocation-light: a name is parsed once into a `Lock` (kept in a bounded cache), so
the hot path of an acquire is a dict lookup.  Everything the wire can send is validated here
and reported as `client.errors.InvalidParams` naming the bad item.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final

from client.errors import InvalidParams
from client.vocabulary import (
    BGL,
    EXCLUSIVE,
    LEVEL_INDEX,
    LEVELS,
    LOCKSET,
    PRIORITY_MAX,
    PRIORITY_MIN,
    RELEASE,
    REQUEST_MODES,
    LockKey,
)

MODES: Final[dict[str, str]] = {mode: mode for mode in REQUEST_MODES}
"""Request modes, mapped to the canonical (interned) constants."""

Pair = tuple["Lock", str]
"""A parsed request pair: the lock and its canonical mode."""


class Lock:
    """One parsed lock name; immutable by convention, shared through the parse cache.

    `key` is the total-order key, `lockset` the name of the level's lockset (the lock itself
    for a lockset), so conflict checks need no string work.
    """

    __slots__ = ("is_set", "key", "level", "lockset", "member", "name")

    def __init__(self, level: int, member: str) -> None:
        self.level: int = level
        self.member: str = member
        self.is_set: bool = member == LOCKSET
        self.name: str = f"{LEVELS[level]}/{member}"
        self.key: LockKey = (level, 0 if self.is_set else 1, member)
        self.lockset: str = f"{LEVELS[level]}/{LOCKSET}"

    def __repr__(self) -> str:
        return f"Lock({self.name!r})"

    def implied(self) -> Lock | None:
        """The lock this one implies (its level's lockset), None for a lockset."""
        return None if self.is_set else parse_lock(self.lockset)


_CACHE: dict[str, Lock] = {}
_CACHE_LIMIT: Final = 1 << 16


def parse_lock(name: Any) -> Lock:
    """The `Lock` for `name`; InvalidParams naming it if it is not a valid lock name."""
    try:
        return _CACHE[name]
    except (KeyError, TypeError):
        return _parse_slow(name)


def _parse_slow(name: Any) -> Lock:
    """Validate and cache a name not seen recently (the cache is cleared when full)."""
    if not isinstance(name, str):
        raise InvalidParams(f"lock name must be a string, got {name!r}")
    level_name, sep, member = name.partition("/")
    if not sep:
        raise InvalidParams(f"malformed lock name {name!r}: expected '<level>/<name>'")
    level = LEVEL_INDEX.get(level_name)
    if level is None:
        raise InvalidParams(
            f"unknown lock level {level_name!r} in {name!r} (levels: {', '.join(LEVELS)})"
        )
    if not member or "/" in member:
        raise InvalidParams(f"malformed lock name {name!r}: the name must be non-empty, no '/'")
    if level == 0 and member not in ("BGL", LOCKSET):
        raise InvalidParams(f"unknown lock {name!r}: the cluster level has only {BGL}")
    lock = Lock(level, member)
    if len(_CACHE) >= _CACHE_LIMIT:
        _CACHE.clear()
    _CACHE[str(name)] = lock
    return lock


def lock_key(name: str) -> LockKey:
    """The total-order key of a lock name (InvalidParams if malformed)."""
    return parse_lock(name).key


def sort_locks(names: Iterable[str]) -> list[str]:
    """`names` in lock order."""
    return sorted(names, key=lock_key)


def parse_level(level: Any) -> int:
    """The index of a level name; InvalidParams naming it if unknown."""
    try:
        return LEVEL_INDEX[level]
    except (KeyError, TypeError):
        raise InvalidParams(f"unknown lock level {level!r} (levels: {', '.join(LEVELS)})") from None


def lockset_name(level: int) -> str:
    """The lockset name of a level index, e.g. 3 -> "node/[lockset]"."""
    return f"{LEVELS[level]}/{LOCKSET}"


def check_priority(priority: Any) -> int:
    """`priority` if it is an int in -20..19, else InvalidParams naming it."""
    if type(priority) is not int or not PRIORITY_MIN <= priority <= PRIORITY_MAX:
        raise InvalidParams(
            f"priority must be an integer in {PRIORITY_MIN}..{PRIORITY_MAX}, got {priority!r}"
        )
    return priority


def parse_request(request: Any, *, allow_release: bool = True, what: str = "request") -> list[Pair]:
    """Validate a list of [lock, mode] pairs into (Lock, mode) pairs, duplicates dropped.

    Rule 1: two different pairs for one lock are InvalidParams; identical repeats are fine.
    `allow_release` False (opportunistic union) rejects "release".
    """
    if not isinstance(request, list | tuple):
        raise InvalidParams(
            f"{what} must be a list of [lock, mode] pairs, got {type(request).__name__}"
        )
    out: list[Pair] = []
    seen: dict[str, str] = {}
    for i, pair in enumerate(request):
        if not isinstance(pair, list | tuple) or len(pair) != 2:
            raise InvalidParams(f"{what}[{i}] must be a [lock, mode] pair, got {pair!r}")
        lock = parse_lock(pair[0])
        raw_mode = pair[1]
        mode = MODES.get(raw_mode) if type(raw_mode) is str else None
        if mode is None or (mode is RELEASE and not allow_release):
            allowed = "shared, exclusive, release" if allow_release else "shared, exclusive"
            raise InvalidParams(
                f"{what}[{i}]: bad mode {raw_mode!r} for {lock.name} (allowed: {allowed})"
            )
        prev = seen.get(lock.name)
        if prev is None:
            seen[lock.name] = mode
            out.append((lock, mode))
        elif prev is not mode:
            raise InvalidParams(
                f"{what}: inconsistent pairs for lock {lock.name}: {prev!r} and {mode!r}"
            )
    return out


def parse_names(locks: Any, *, what: str = "locks") -> list[Lock]:
    """Validate a list of lock names (for intersect_locks)."""
    if not isinstance(locks, list | tuple):
        raise InvalidParams(f"{what} must be a list of lock names, got {type(locks).__name__}")
    return [parse_lock(name) for name in locks]


def conflicts(a: Lock, mode_a: str, b: Lock, mode_b: str) -> bool:
    """The conflict rule of docs/contracts.md#lock-conflicts between two *different* owners:
    the same lock, or a lockset and a member of its level, conflict iff either side is
    exclusive.  (The reference definition; the table uses indexes that give the same
    answer.)"""
    related = a.name == b.name or (a.level == b.level and a.is_set != b.is_set)
    return related and (mode_a == EXCLUSIVE or mode_b == EXCLUSIVE)


def pairs_view(pairs: Sequence[Pair]) -> list[list[str]]:
    """Pairs as wire JSON, [[lock, mode]] in lock order."""
    return [[lock.name, mode] for lock, mode in sorted(pairs, key=lambda p: p[0].key)]
