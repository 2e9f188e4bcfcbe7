"""Where a daemon's group commit writes each batch: on the event-loop thread, or on its
store's own thread (wconfd's journal, wconfd.storage.store; luxid's job database,
luxid.storage.group_commit).

A thread hand-off costs ~100 µs here, as much as a flush on a fast disk, so a lone writer
is best served on the loop.  Where the disk is slow (a write averaging `inline_threshold`,
default 2 ms, or more) the writes go to the thread: the loop then never stalls for long.
Whether batches shared by several clients go there too is the store's choice
(`thread_for_shared`): luxid's commits are whole SQLite transactions, and the loop does
useful work meanwhile; wconfd's journal writes one small buffer, and blocking the loop
for it costs less than the hand-off (the clients' next requests pile up meanwhile and
share the next write: 8 contending lock clients ran 20% faster, with 30% less CPU).
`mode` "inline" and "thread" force one way.  Pure: told each written batch's size and time.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

SyncMode = Literal["auto", "inline", "thread"]


@dataclass
class WritePlacement:
    """The choice for the next batch, from how the last ones went."""

    mode: SyncMode = "auto"
    inline_threshold: float = 0.002  # seconds
    ewma: float = 0.0  # a write's time, smoothed
    thread_for_shared: bool = True  # batches shared by several clients go to the thread
    shared: bool = False  # the last batch held records of more than one append

    def use_thread(self) -> bool:
        """Whether the next batch goes to the store thread."""
        if self.mode == "auto":
            return (self.thread_for_shared and self.shared) or self.ewma >= self.inline_threshold
        return self.mode == "thread"

    def wrote(self, records: int, elapsed: float) -> None:
        """A batch of `records` records was written in `elapsed` seconds."""
        self.ewma = 0.8 * self.ewma + 0.2 * elapsed
        self.shared = records > 1
