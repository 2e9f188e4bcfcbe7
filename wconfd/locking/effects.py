"""What a lock-core operation did, for the daemon shell to act on (answer held-open calls,
journal changed holdings).  Plain msgspec Structs: cheap to build, easy to log."""

from __future__ import annotations

import msgspec


class Effects(msgspec.Struct):
    """Side effects of one mutating operation.

    - `changed`: owners whose held locks changed (the caller and/or granted ones), each once:
      journal `held_by(owner)` for each before answering any call.
    - `granted`: owners whose queued waiting request was granted by this operation, in grant
      order: answer their held-open `update_locks_waiting` with granted=true.
    - `withdrawn`: owner -> blockers at that moment, for queued requests this operation
      dropped (free/intersect/downgrade calls, remove_owner): answer granted=false.
    - `opportunistic`: owner -> result locks, for opportunistic waits that ended (all
      acquirable locks held, or dropped by free/intersect/remove_owner): answer with them.
    """

    changed: list[str] = []
    granted: list[str] = []
    withdrawn: dict[str, list[str]] = {}
    opportunistic: dict[str, list[str]] = {}

    def empty(self) -> bool:
        """True when the operation had no effect the shell must act on."""
        return not (self.changed or self.granted or self.withdrawn or self.opportunistic)


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
