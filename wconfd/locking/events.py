"""Lock events (docs/contracts.md#events): pure, from what a lock operation changed.

Topic `lock`, `key` the lock, `data.owner` the client id and `data.mode` the mode:
`granted` (the mode now held, a mode change included), `released` (the mode it held),
`waiting` (the mode a queued request asks for).  wconfd produces them only while someone
follows topic `lock`, so lock operations cost nothing more otherwise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence

from client.api.common import Event
from client.events import new_event

from .names import RELEASE

DAEMON = "wconfd"
# The mode `owner` held `lock` in before the change (None: not held).
HeldMode = Callable[[str, str], str | None]


def _event(action: str, lock: str, owner: str, mode: str | None, ts: float) -> Event:
    return new_event(DAEMON, "lock", action, lock, {"owner": owner, "mode": mode}, ts)


def change_events(
    changes: Mapping[str, Sequence[tuple[str, str]]], held_before: HeldMode, ts: float
) -> list[Event]:
    """`granted`/`released` for each (lock, mode) pair an operation changed, per owner in
    order; a release names the mode that was held."""
    out = []
    for owner, pairs in changes.items():
        for lock, mode in pairs:
            if mode == RELEASE:
                out.append(_event("released", lock, owner, held_before(owner, lock), ts))
            else:
                out.append(_event("granted", lock, owner, mode, ts))
    return out


def waiting_events(owner: str, request: Iterable[Sequence[str]], ts: float) -> list[Event]:
    """`waiting` for each lock a queued request asks for (releases are no wait)."""
    return [_event("waiting", lock, owner, mode, ts) for lock, mode in request if mode != RELEASE]
