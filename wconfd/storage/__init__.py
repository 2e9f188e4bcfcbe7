"""Durable storage for wconfd's state machines (config, locks, reservations).

I/O lives here and only here.  `LocalStore` is an append-only journal with group commit
and atomic JSON snapshots, generic over the record and snapshot types; `DurableStore` is
the small interface (open/load, append, snapshot, close) a replicated store can implement
later (SPEC §13).  `recover` rebuilds any state from a store.  `ConfigStore` and
`ReservationStore` join the pure cores of `wconfd.config` to a store: the live write path.
"""

from .durable import ConfigStore, ReservationStore, Written
from .errors import JournalCorruptError, SnapshotCorruptError, StorageCorruptError
from .fileops import FileOps
from .store import DurableStore, Loaded, LocalStore, StoreStats, recover

__all__ = [
    "ConfigStore",
    "DurableStore",
    "FileOps",
    "JournalCorruptError",
    "Loaded",
    "LocalStore",
    "ReservationStore",
    "SnapshotCorruptError",
    "StorageCorruptError",
    "StoreStats",
    "Written",
    "recover",
]
