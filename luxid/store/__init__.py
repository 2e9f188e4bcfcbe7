"""Durable job storage of luxid (SPEC §6.1): SQLite in WAL mode, synchronous=FULL.

The only I/O module of the job queue's data; `luxid.jobs` stays pure and this package
persists the Jobs it produces. See `luxid.store.sqlite` for the layout and costs.
"""

from luxid.store.sqlite import (
    DB_FILENAME,
    SCHEMA_VERSION,
    JobBuilder,
    JobStore,
    StoreTransaction,
    default_path,
    open_store,
)

__all__ = [
    "DB_FILENAME",
    "SCHEMA_VERSION",
    "JobBuilder",
    "JobStore",
    "StoreTransaction",
    "default_path",
    "open_store",
]
