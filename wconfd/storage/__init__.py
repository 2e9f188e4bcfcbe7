"""How wconfd's durable state reaches disk or etcd, and comes back.

I/O lives here and only here.  The records and snapshots stored are defined in
wconfd/durable_state.py (pure); this package imports them where it must know them (the
etcd key layout) and they never import it.  wconfd/persistence.py, above both, owns the
store in the running daemon.

- seam.py: `DurableStore`, what the daemon asks of a store and what an implementation
  promises, and `recover`, which rebuilds any state from a store.
- store.py: `LocalStore`, an append-only journal with group commit plus atomic JSON
  snapshots in a state directory, generic over the record and snapshot types; its parts
  are journal_format.py (frame format and recovery scan), journal_io.py (the blocking
  file I/O), layout.py (positions and preallocation), batch.py (one group-commit batch),
  snapshot.py (snapshot files) and fileops.py (the system calls, replaceable in tests).
- etcd_store.py: `EtcdStore`, the store of one master's term on etcd; etcd_keys.py maps
  wconfd's state and records to etcd keys (pure).
- errors.py: what loading unreadable state raises.
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
