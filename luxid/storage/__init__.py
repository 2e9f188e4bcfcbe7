"""Durable job storage of luxid behind one seam (luxid.storage.base), as wconfd's
wconfd.storage is for the configuration.

Two implementations keep that seam's promises:

- SQLite in WAL mode with synchronous=FULL (luxid.storage.sqlite), the embedded store of a
  single node: `open_store(state_dir)` opens it;
- etcd (luxid.storage.etcd, its key layout in luxid.storage.etcd_keys), the replicated
  store: luxid.ha opens it, fenced by the leader key, each time the node becomes master.

`luxid.jobs` stays pure; this package persists the Jobs it produces, and
luxid.storage.group_commit is the one writer that batches luxid's changes into
transactions, whichever store is behind it.
"""

from __future__ import annotations

import os

from luxid.storage.base import JobStore, StoreTransaction
from luxid.storage.sqlite import DB_FILENAME, SCHEMA_VERSION, SqliteJobStore, default_path


def open_store(state_dir: str | os.PathLike[str]) -> JobStore:
    """The job store of a state directory (StorageError if it cannot be opened)."""
    return SqliteJobStore.open(default_path(state_dir))


__all__ = [
    "DB_FILENAME",
    "SCHEMA_VERSION",
    "JobStore",
    "SqliteJobStore",
    "StoreTransaction",
    "default_path",
    "open_store",
]
