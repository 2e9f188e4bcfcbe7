"""The storage seam of wconfd (docs/architecture.md#storage): what the daemon needs from
durable storage.

wconfd's state is a state machine: a snapshot plus an ordered log of change records.
`DurableStore` is all the daemon asks of the storage under it.  Two implementations:
`LocalStore` (a local journal with group commit plus JSON snapshots, store.py) and
`EtcdStore` (the records as operations on etcd keys, committed by the master of one term,
etcd_store.py).  `recover` rebuilds any state from a store.

What an implementation must promise:

- Ordering.  Records get consecutive sequence numbers in the order `append_nowait` /
  `append` is called on the event loop; `open()` returns them in that order, and the
  `on_durable` callbacks run in that order, on the event loop thread.
- Durability before the answer.  The awaitable an append returns completes only once the
  record survives a crash of this process and of the machine (for a local disk: written
  and flushed; for etcd: committed by a quorum).  `on_durable(record)` runs exactly then,
  even if the awaiting task was cancelled meanwhile, so memory never misses a durable
  record and never holds one that is not.
- Atomic batches.  Records queued back to back (no await between the calls) are one
  batch: after a crash all of them or none of them are found by `open()`.
- Failure.  If a batch cannot be made durable, every awaitable of the batch fails with
  client.errors.StorageError, no `on_durable` of it runs, and storage is as before the
  batch (a later `open()` does not find it).  If the implementation cannot even guarantee
  that, it refuses every further append with StorageError until restarted.  So does one
  that has lost the right to write (etcd: a deposed master, whose fencing token no longer
  matches the leader key): nothing it can no longer order may be acknowledged.  A failed
  `snapshot` leaves the previous snapshot and the records after it valid.
- Snapshots.  `snapshot(state, seq)` stores `state` as the state after record `seq` and
  may then drop records up to `seq`; `open()` returns the newest snapshot and exactly the
  records after it.  A record must never be dropped before a snapshot including it is
  durable.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any, Generic, NamedTuple, Protocol, TypeVar

from .errors import SnapshotCorruptError

S = TypeVar("S")
R = TypeVar("R")
T = TypeVar("T")


class Loaded(NamedTuple, Generic[S, R]):
    """What `open()` found: the snapshot (None if none), the seq it includes, the journal
    records after it in order, the last seq, how many torn-tail bytes were dropped, and
    whether the snapshot is known to be exactly as a daemon wrote it (`checked`: a local
    snapshot file whose checksum matched), so its contents need no second check."""

    snapshot: S | None
    snapshot_seq: int
    records: list[R]
    last_seq: int
    torn_bytes: int
    checked: bool = False


class DurableStore(Protocol[S, R]):
    """The interface wconfd's state needs from storage; see the module docstring for the
    promises an implementation makes."""

    def open(self) -> Loaded[S, R]:
        """Load the snapshot and the records after it; ready the store for appends.
        StorageCorruptError if what is stored cannot be trusted."""
        ...

    def append_nowait(
        self, record: R, on_durable: Callable[[R], Any] | None = None
    ) -> asyncio.Future[int]:
        """Queue `record` (its seq is the next one) and return the future of its
        durability; records queued back to back form one atomic batch."""
        ...

    async def append(self, record: R, on_durable: Callable[[R], Any] | None = None) -> int:
        """Queue `record` and wait until it is durable; its seq (StorageError otherwise)."""
        ...

    def append_sync(self, record: R) -> int:
        """Blocking `append`, for start-up and tools (no appends may be in flight)."""
        ...

    @property
    def durable_seq(self) -> int:
        """The seq of the last durable record."""
        ...

    @property
    def snapshot_due(self) -> bool:
        """Whether enough records accumulated that a snapshot should be taken."""
        ...

    def snapshot(self, state: S | bytes, seq: int | None = None) -> Awaitable[bool]:
        """Store `state` (as of record `seq`, default the last durable one; both taken at
        the call) and compact the records it includes.  False if one was already running."""
        ...

    def snapshot_sync(self, state: S | bytes, seq: int | None = None) -> None:
        """Blocking `snapshot`, for start-up and tools."""
        ...

    def close(self) -> None:
        """Release files, connections and threads; queued appends fail with StorageError."""
        ...


def recover(
    store: DurableStore[S, R],
    *,
    initial: Callable[[], T],
    from_snapshot: Callable[[S], T],
    from_checked: Callable[[S], T] | None = None,
    apply: Callable[[T, R], Any] | None = None,
    replay: Callable[[T, list[R]], Any] | None = None,
    to_snapshot: Callable[[T], S | bytes] | None = None,
) -> T:
    """Open `store` and rebuild the state: snapshot (or `initial()`) + journal replay,
    record by record (`apply`) or all records in one call (`replay`).

    `from_checked`, if given, rebuilds instead of `from_snapshot` a snapshot known to be
    exactly as written (Loaded.checked), whose contents need no second check.

    With `to_snapshot`, a store without a snapshot gets one of the initial state at seq 0
    at once (so a random initial state, like a fresh config's uuids, is fixed on disk
    before any record builds on it), and a journal without a snapshot is refused.
    """
    loaded = store.open()
    if loaded.snapshot is not None:
        rebuild = from_checked if loaded.checked and from_checked is not None else from_snapshot
        state = rebuild(loaded.snapshot)
    else:
        if to_snapshot is not None and loaded.records:
            path = getattr(store, "snapshot_path", "snapshot")
            raise SnapshotCorruptError(
                path, f"missing, but the journal has {len(loaded.records)} records"
            )
        state = initial()
        if to_snapshot is not None:
            store.snapshot_sync(to_snapshot(state), 0)
    if replay is not None:
        replay(state, loaded.records)
    else:
        assert apply is not None, "recover needs apply or replay"
        for record in loaded.records:
            apply(state, record)
    return state
