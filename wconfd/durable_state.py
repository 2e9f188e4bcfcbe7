"""What wconfd keeps durable: the change records, the snapshot, and the state they rebuild.

Pure, like wconfd.config and wconfd.locking: no I/O.  The storage under it
(wconfd.storage: a local journal, or etcd) moves these records and snapshots to disk and
back; wconfd.persistence joins the two.

Three kinds of change share the journal so their order is one order: configuration
changes and reservation changes (records of wconfd.config), and lock changes.  A lock
record (`LockChange`) carries the (lock, mode) pairs one operation changed for one client
- acquire, upgrade, downgrade or release - so its size and cost grow with the change, not
with what the client holds (docs/contracts.md#lock-rules, durability before the answer); the
snapshot carries the whole table.  Journals written before that format hold `HeldLocks`
records (a client's whole holdings after a change); they replay unchanged, so an upgrade
needs no manual step.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Final, TypeAlias, cast, get_args

import msgspec

from client.api.common import Event
from client.audit import AuditEntry
from client.events import EVENT_SLOTS, EventRing, Retention, numbered
from wconfd.config import ConfigChange, ConfigDocument, ConfigState, ReservationChange
from wconfd.config.events import config_event
from wconfd.config.reservations import ReservationSnapshot, ReservationTable
from wconfd.locking.names import RELEASE

Held = list[tuple[str, str]]


class LockChange(msgspec.Struct, frozen=True, tag="lock_change", tag_field="t"):
    """The pairs one operation changed for `client_id`, in order; mode "release" drops a
    lock, "shared"/"exclusive" acquire it or change its mode."""

    client_id: str
    pairs: Held


class HeldLocks(msgspec.Struct, frozen=True, tag="locks", tag_field="t"):
    """The journal's lock record before LockChange: all locks `client_id` held after a
    change (empty: none).  Read from old journals; no longer written."""

    client_id: str
    locks: Held


class EventNote(msgspec.Struct, frozen=True, tag="events", tag_field="t"):
    """Events no other record tells of (lock events, a master change), not numbered yet:
    applying numbers them."""

    events: list[Event]


class AuditNote(msgspec.Struct, frozen=True, tag="audit", tag_field="t"):
    """Audited calls, numbered (docs/contracts.md#audit-log), and the change they tell of
    when they have one: one record, so a torn journal tail keeps both or neither.  The
    entries are not state: they are kept for queries apart from it (wconfd.audit_log)."""

    entries: list[AuditEntry]
    change: ConfigChange | ReservationChange | None = None


Record: TypeAlias = (
    ConfigChange | ReservationChange | LockChange | HeldLocks | EventNote | AuditNote
)


_CONFIG_CHANGES: Final = frozenset(get_args(ConfigChange))


class Snapshot(msgspec.Struct, frozen=True):
    """The whole durable state at one journal position."""

    config: ConfigDocument
    reservations: ReservationSnapshot = msgspec.field(default_factory=ReservationSnapshot)
    locks: dict[str, Held] = {}
    events: list[msgspec.Raw] = []  # each an Event's JSON
    events_last: int = 0
    events_pruned: int = 0


class DurableState:
    """The state the journal rebuilds: config, reservations and durable lock holdings
    (`locks`: client id -> {lock: mode}, clients holding nothing absent)."""

    def __init__(
        self,
        config: ConfigState,
        reservations: ReservationTable,
        locks: dict[str, dict[str, str]],
        events: EventRing | None = None,
    ) -> None:
        self.config = config
        self.reservations = reservations
        self.locks = locks
        self.events = events if events is not None else EventRing()
        # On etcd: the revision of the record being applied (events are numbered from it).
        self.revision: Callable[[], int] | None = None

    @classmethod
    def fresh(cls, now: float, retention: Retention | None = None) -> DurableState:
        """A fresh state directory's state: the default config, nothing held, no events."""
        return cls(ConfigState.fresh(now), ReservationTable(), {}, EventRing(retention))

    @classmethod
    def from_snapshot(
        cls, snap: Snapshot, retention: Retention | None = None, *, checked: bool = False
    ) -> DurableState:
        """Rebuild from a snapshot.  The config is validated object by object unless
        `checked`: the snapshot is byte for byte one this daemon's code wrote from its
        state, every object of which passed those checks when its change was planned
        (docs/contracts.md#performance-targets: at 100,000 instances the second check
        is most of a restart).  A checked snapshot was decoded from its compact JSON, so
        its events are kept as they are, not reformatted one by one."""
        ring = EventRing(retention, pruned=snap.events_pruned)
        ring.extend_json(snap.events, compact=checked)
        ring.set_last(snap.events_last)
        return cls(
            ConfigState(snap.config, validate=not checked),
            ReservationTable.from_snapshot(snap.reservations),
            {owner: dict(held) for owner, held in snap.locks.items() if held},
            ring,
        )

    def start_term(self, revision: int) -> None:
        """On etcd: this term's events are numbered above `revision` (the load's), and
        older ones are not kept (a `gap` for anyone asking for them)."""
        base = revision * EVENT_SLOTS
        self.events = EventRing(self.events.retention, last=base, pruned=base)

    def apply(self, record: Record) -> None:
        """Apply one durable record (live, after it is on disk, and at replay)."""
        if isinstance(record, ConfigChange):
            event = config_event(self.config, record)
            self.config.apply(record)
            self._number([event])
        elif isinstance(record, EventNote):
            self._number(record.events)
        elif isinstance(record, LockChange):
            self._apply_lock_change(record.client_id, record.pairs)
        elif isinstance(record, AuditNote):  # its entries are kept apart: wconfd.audit_log
            if record.change is not None:
                self.apply(record.change)
        elif isinstance(record, HeldLocks):
            if record.locks:
                self.locks[record.client_id] = dict(record.locks)
            else:
                self.locks.pop(record.client_id, None)
        else:
            self.reservations.apply(record)

    def replay(self, records: Iterable[Record]) -> None:
        """Apply the journal's records at load, as `apply` of each in turn would, in one
        pass: the events of all of them numbered and kept in one step (the retention rule
        judged once, at the end), and the config's indexes left to be built once, when
        first read (docs/contracts.md#performance-targets: 100,000 records at a restart).
        Only before a term's revision is set (events numbered one after another)."""
        assert self.revision is None, "replay numbers events one after another"
        config = self.config
        events: list[Event] = []
        index = self.events.last
        for record in records:
            if type(record) is AuditNote:
                if record.change is None:
                    continue
                record = record.change
            if type(record) in _CONFIG_CHANGES:  # by type: isinstance of a union is slower
                change = cast(ConfigChange, record)
                index += 1
                events.append(config_event(config, change, index))
                config.apply(change)
            elif type(record) is EventNote:
                events += numbered(record.events, index + 1)
                index += len(record.events)
            else:  # locks and reservations: no events
                self.apply(record)
        self.events.extend(events)

    def _number(self, drafts: list[Event]) -> None:
        """Keep events, numbered one above the last (on etcd: from the revision)."""
        ring = self.events
        first = ring.last + 1
        if self.revision is not None:
            first = max(first, self.revision() * EVENT_SLOTS)
        ring.extend(numbered(drafts, first))

    def _apply_lock_change(self, owner: str, pairs: Held) -> None:
        held = self.locks.get(owner)
        if held is None:
            held = self.locks[owner] = {}
        for lock, mode in pairs:
            if mode == RELEASE:
                held.pop(lock, None)
            else:
                held[lock] = mode
        if not held:
            del self.locks[owner]

    def held_lists(self) -> dict[str, list[list[str]]]:
        """The durable holdings as LockManager.restore takes them."""
        return {owner: [[lk, m] for lk, m in held.items()] for owner, held in self.locks.items()}

    def snapshot_json(self) -> bytes:
        """The snapshot as compact JSON, reusing the config's cached encoding."""
        ring = self.events
        rest = msgspec.json.encode(
            {
                "reservations": self.reservations.snapshot(),
                "locks": self.held_lists(),
                "events": ring.kept_json(),
                "events_last": ring.last,
                "events_pruned": ring.pruned,
            }
        )
        return b'{"config":' + self.config.get_config_json() + b"," + rest[1:]
