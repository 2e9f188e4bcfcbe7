"""What wconfd keeps on disk: one journal of change records and its snapshot.

Three kinds of change share the journal so their order is one order: configuration
changes and reservation changes (records of wconfd.config), and lock holdings.  A lock
record carries a client's whole set of held locks, not a delta, so replaying it twice
is harmless and the last record of a client is its durable state.
"""

from __future__ import annotations

from typing import TypeAlias

import msgspec

from wconfd.config import ConfigChange, ConfigDocument, ConfigState, ReservationChange
from wconfd.config.reservations import ReservationSnapshot, ReservationTable

Held = list[tuple[str, str]]


class HeldLocks(msgspec.Struct, frozen=True, tag="locks", tag_field="t"):
    """All locks `client_id` holds after a change (empty: it holds none)."""

    client_id: str
    locks: Held


Record: TypeAlias = ConfigChange | ReservationChange | HeldLocks


class Snapshot(msgspec.Struct, frozen=True):
    """The whole durable state at one journal position."""

    config: ConfigDocument
    reservations: ReservationSnapshot = msgspec.field(default_factory=ReservationSnapshot)
    locks: dict[str, Held] = {}


class DurableState:
    """The state the journal rebuilds: config, reservations and durable lock holdings."""

    def __init__(
        self, config: ConfigState, reservations: ReservationTable, locks: dict[str, Held]
    ) -> None:
        self.config = config
        self.reservations = reservations
        self.locks = locks

    @classmethod
    def fresh(cls, now: float) -> DurableState:
        """A fresh state directory's state: the default config, nothing held."""
        return cls(ConfigState.fresh(now), ReservationTable(), {})

    @classmethod
    def from_snapshot(cls, snap: Snapshot) -> DurableState:
        """Rebuild from a snapshot (validates the config)."""
        return cls(
            ConfigState(snap.config),
            ReservationTable.from_snapshot(snap.reservations),
            {owner: list(held) for owner, held in snap.locks.items() if held},
        )

    def apply(self, record: Record) -> None:
        """Apply one durable record (live, after it is on disk, and at replay)."""
        if isinstance(record, HeldLocks):
            if record.locks:
                self.locks[record.client_id] = list(record.locks)
            else:
                self.locks.pop(record.client_id, None)
        elif isinstance(record, ConfigChange):
            self.config.apply(record)
        else:
            self.reservations.apply(record)

    def snapshot_json(self) -> bytes:
        """The snapshot as compact JSON, reusing the config's cached encoding."""
        rest = msgspec.json.encode(
            {"reservations": self.reservations.snapshot(), "locks": self.locks}
        )
        return b'{"config":' + self.config.get_config_json() + b"," + rest[1:]
