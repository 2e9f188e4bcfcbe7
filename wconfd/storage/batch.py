"""One group-commit batch of a LocalStore: its records, their framing, and what happens to
their callers when the write succeeds (each record's `on_durable`, then its waiter, in
seq order) or fails (every waiter gets the error).  Also the store's counters.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .journal_format import HEADER, encode_frame

log = logging.getLogger("wconfd.storage")


@dataclass
class StoreStats:
    """Counters for benchmarks and the daemon's status line; `on_write`, if set, is told
    the seconds each batch's write + fsync took (wconfd's journal flush metric)."""

    appends: int = 0
    writes: int = 0
    inline_writes: int = 0
    write_seconds: float = 0.0
    max_batch: int = 0
    failed_writes: int = 0
    extensions: int = 0
    snapshots: int = 0
    last_snapshot_seconds: float = 0.0
    last_snapshot_bytes: int = 0
    on_write: Callable[[float], object] | None = None

    def wrote(self, elapsed: float) -> None:
        """Count one batch written (or failed) in `elapsed` seconds."""
        self.writes += 1
        self.write_seconds += elapsed
        if self.on_write is not None:
            self.on_write(elapsed)


class Pending:
    """A queued record: its payload, its waiter and callback; seq set when framed."""

    __slots__ = ("fut", "on_durable", "payload", "record", "seq")

    def __init__(
        self,
        record: Any,
        payload: bytes,
        fut: asyncio.Future[int] | None,
        on_durable: Callable[[Any], Any] | None,
    ) -> None:
        self.record = record
        self.payload = payload
        self.fut = fut
        self.on_durable = on_durable
        self.seq = 0


def frame_batch(batch: list[Pending], first_seq: int) -> bytes:
    """Give the records consecutive seqs from `first_seq` and frame them as one write."""
    for i, item in enumerate(batch):
        item.seq = first_seq + i
    return b"".join(encode_frame(p.payload, p.seq, first_seq) for p in batch)


def frame_sizes(batch: list[Pending]) -> list[int]:
    """The on-disk size of each record's frame."""
    return [len(p.payload) + HEADER.size for p in batch]


def fail_batch(batch: list[Pending], exc: BaseException) -> None:
    """Every waiter of a failed batch gets `exc`; no `on_durable` runs."""
    for item in batch:
        if item.fut is not None and not item.fut.done():
            item.fut.set_exception(exc)


def complete_batch(batch: list[Pending]) -> None:
    """A durable batch: run each `on_durable` in seq order, then answer its waiter (with
    the seq, or the callback's exception - a bug of the caller, logged)."""
    for item in batch:
        error: BaseException | None = None
        if item.on_durable is not None:
            try:
                item.on_durable(item.record)
            except Exception as exc:  # a bug in the caller; report it to the waiter
                log.exception("on_durable callback failed for record seq %d", item.seq)
                error = exc
        if item.fut is not None and not item.fut.done():
            if error is None:
                item.fut.set_result(item.seq)
            else:
                item.fut.set_exception(error)
