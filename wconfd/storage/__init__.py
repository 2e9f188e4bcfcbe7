"""Durable storage for wconfd's state machines (config, locks, reservations).

I/O lives here and only here.  `LocalStore` is an append-only journal with group commit
and atomic JSON snapshots, generic over the record and snapshot types; `DurableStore` is
the small interface (open/load, append, snapshot, close) a replicated store can implement
later (SPEC §13).  `recover` rebuilds any state from a store.  The daemon's live write path
(plan, check locks, persist, apply) is wconfd/persistence.py over wconfd/durable.py;
`DurableStore` and what an implementation promises are in seam.py.
"""

from .errors import JournalCorruptError, SnapshotCorruptError, StorageCorruptError
from .fileops import FileOps
from .seam import DurableStore, Loaded, recover
from .store import LocalStore, StoreStats

__all__ = [
    "DurableStore",
    "FileOps",
    "JournalCorruptError",
    "Loaded",
    "LocalStore",
    "SnapshotCorruptError",
    "StorageCorruptError",
    "StoreStats",
    "recover",
]
