"""What a lock-core operation did, for the daemon shell to act on (answer held-open calls,
journal the changed pairs).  Plain msgspec Structs: cheap to build, easy to log."""

from __future__ import annotations

import msgspec


class Effects(msgspec.Struct):
    """Side effects of one mutating operation.

    - `changes`: owner -> the (lock, mode) pairs this operation changed for it, in the order
      they were applied; mode "release" drops the lock.  Only owners whose holdings
      changed appear, each once (the caller and/or granted ones).  Journal them before
      answering any call: replayed in order over the holdings before, they give the
      holdings after, and their size is that of the change, not of the holdings.
    - `granted`: owners whose queued waiting request was granted by this operation, in grant
      order: answer their held-open `update_locks_waiting` with granted=true.
    - `withdrawn`: owner -> blockers at that moment, for queued requests this operation
      dropped (free/intersect/downgrade calls, remove_owner): answer granted=false.
    - `opportunistic`: owner -> result locks, for opportunistic waits that ended (all
      acquirable locks held, or dropped by free/intersect/remove_owner): answer with them.
    """

    changes: dict[str, list[tuple[str, str]]] = {}
    granted: list[str] = []
    withdrawn: dict[str, list[str]] = {}
    opportunistic: dict[str, list[str]] = {}

    @property
    def changed(self) -> list[str]:
        """The owners whose holdings changed, in the order they first changed."""
        return list(self.changes)

    def add_changes(self, owner: str, pairs: list[tuple[str, str]]) -> None:
        """Record pairs applied for `owner` (nothing if `pairs` is empty)."""
        if pairs:
            mine = self.changes.get(owner)
            if mine is None:
                self.changes[owner] = pairs
            else:
                mine.extend(pairs)

    def empty(self) -> bool:
        """True when the operation had no effect the shell must act on."""
        return not (self.changes or self.granted or self.withdrawn or self.opportunistic)


class Update(msgspec.Struct):
    """Result of try_update / update_waiting / withdraw.

    `applied`: the request took effect now (blockers == []).  `pending`: it was queued and
    waits (update_waiting only).  `blockers`: sorted owners blocking it (held locks or, by
    rule 5, earlier waiting requests); [] when applied.
    """

    applied: bool
    pending: bool
    blockers: list[str]
    effects: Effects


class Opportunistic(msgspec.Struct):
    """Result of opportunistic_lock_union / finish_opportunistic.

    `locks`: the request's locks now held at least as strongly as requested, in lock order
    ([] if fewer than min_count).  `waiting`: an opportunistic wait was registered (the
    shell answers when `Effects.opportunistic` names the owner, or calls
    finish_opportunistic at its timeout).
    """

    locks: list[str]
    waiting: bool
    effects: Effects
