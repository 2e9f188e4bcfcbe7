"""Durable job storage of luxid (SPEC §6.1, §13) behind one seam (luxid.store.base).

`open_store(state_dir)` opens the embedded implementation, SQLite in WAL mode with
synchronous=FULL (luxid.store.sqlite); SPEC §13's etcd store will be chosen here too.
`luxid.jobs` stays pure; this package persists the Jobs it produces, and
luxid.store.group_commit is the one writer that batches luxid's changes into transactions.
"""

from __future__ import annotations

import os

from luxid.store.base import JobStore, StoreTransaction
from luxid.store.sqlite import DB_FILENAME, SCHEMA_VERSION, SqliteJobStore, default_path


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
