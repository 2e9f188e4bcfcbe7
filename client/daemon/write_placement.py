"""Where a daemon's group commit writes each batch: on the event-loop thread, or on its
store's own thread (wconfd's journal, wconfd.storage.store; luxid's job database,
luxid.store.group_commit).

A thread hand-off costs ~100 µs here, as much as a flush on a fast disk, so a lone writer
is best served on the loop.  Where the disk is slow (a write averaging `inline_threshold`,
default 2 ms, or more), or several clients' records share the batches (the last one held
more than one), the writes go to the thread: the loop then never stalls for long and goes
on serving the other clients (their reads, their next records) while the disk works.
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
    shared: bool = False  # the last batch held records of more than one append

    def use_thread(self) -> bool:
        """Whether the next batch goes to the store thread."""
        if self.mode == "auto":
            return self.shared or self.ewma >= self.inline_threshold
        return self.mode == "thread"

    def wrote(self, records: int, elapsed: float) -> None:
        """A batch of `records` records was written in `elapsed` seconds."""
        self.ewma = 0.8 * self.ewma + 0.2 * elapsed
        self.shared = records > 1
