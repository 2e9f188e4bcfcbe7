"""Lock enforcement for config writes (docs/contracts.md#lock-enforcement): which locks a
write needs, and the check.

Pure: the caller passes `holds_exclusive(lock_name) -> bool` over its lock table.

- node / instance / nodegroup / network: `<level>/<name>` held exclusively, or the level's
  lockset `<level>/[lockset]` held exclusively.  A rename needs the lock of the old name
  *and* of the new name: the old one because the object being renamed is the one other
  jobs lock, the new one so no job can create or lock an object of that name meanwhile.
- cluster: `cluster/BGL` exclusively (or `cluster/[lockset]` exclusively, which covers it).
- filter, drain: nothing; queue control must never wait for the queue.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final

import msgspec

from client.errors import LockNotHeld
from client.vocabulary import BGL, LOCKSET

from .objects import ConfigObject, Kind, LockEnforcement

# The lock level guarding each kind (the levels of docs/contracts.md#lock-names-and-order);
# filters are not guarded.
KIND_LEVEL: Final[dict[Kind, str]] = {
    "cluster": "cluster",
    "nodegroup": "nodegroup",
    "node": "node",
    "instance": "instance",
    "network": "network",
}


def locks_for_write(
    kind: Kind, old: ConfigObject | None, new: ConfigObject | None
) -> tuple[str, ...]:
    """The locks (each needed exclusively) for changing `old` into `new`.

    `old` is None for an add, `new` None for a remove.  Returns () for filters, drains and budgets.
    """
    level = KIND_LEVEL.get(kind)
    if level is None:
        return ()
    if kind == "cluster":
        return (BGL,)
    names: list[str] = []
    for obj in (old, new):
        name = getattr(obj, "name", None)
        if name and name not in names:
            names.append(name)
    return tuple(f"{level}/{name}" for name in names)


def lockset_of(lock: str) -> str:
    """The lockset of the level of `lock` (`node/n1` -> `node/[lockset]`)."""
    return lock.split("/", 1)[0] + "/" + LOCKSET


def missing_locks(locks: Iterable[str], holds_exclusive: Callable[[str], bool]) -> list[str]:
    """The locks of `locks` held neither exclusively nor through their lockset."""
    return [
        lock
        for lock in locks
        if not holds_exclusive(lock) and not holds_exclusive(lockset_of(lock))
    ]


def check_locks(
    kind: Kind,
    locks: Iterable[str],
    holds_exclusive: Callable[[str], bool],
    mode: LockEnforcement,
) -> str | None:
    """Check that the caller holds `locks`; None if it does.

    Missing locks raise LockNotHeld ("enforce") or return the warning text ("warn") for the
    caller to log.  The message names the locks to take and how.
    """
    missing = missing_locks(locks, holds_exclusive)
    if not missing:
        return None
    alternatives = ", ".join(f"{lock} (or {lockset_of(lock)})" for lock in missing)
    request = [[lock, "exclusive"] for lock in missing]
    message = (
        f"writing a {kind} needs exclusive lock(s) {alternatives}; take them first, e.g. "
        f"update_locks_waiting({msgspec.json.encode(request).decode()})"
    )
    if mode == "warn":
        return "lock enforcement (warn mode): " + message
    raise LockNotHeld(message, {"locks": missing})
