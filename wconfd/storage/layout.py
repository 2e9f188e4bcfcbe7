"""Where a LocalStore's records are in its current journal file, and how much of the file
is preallocated: pure bookkeeping, updated on the loop thread as writes, extensions and
journal restarts complete.

Preallocation: the store keeps zeros written and synced ahead of the write position so a
record write needs no metadata commit; a new extension is due when less than half of
`prealloc` is left, and after a failed one it is not retried for `prealloc` bytes.
"""

from __future__ import annotations


class JournalLayout:
    """Positions in the current journal: end of records (`pos`), end of preallocated
    space (`alloc_end`), each record's offset, and the seq of the file's first record."""

    __slots__ = ("alloc_end", "extend_backoff", "first_seq", "offsets", "pos")

    def __init__(
        self, pos: int = 0, alloc_end: int = 0, offsets: list[int] | None = None, first_seq: int = 1
    ) -> None:
        self.pos = pos
        self.alloc_end = alloc_end
        self.offsets: list[int] = offsets if offsets is not None else []
        self.first_seq = first_seq
        self.extend_backoff = 0

    def placed(self, start: int, sizes: list[int]) -> None:
        """Records of `sizes` bytes were written from `start`."""
        pos = start
        for size in sizes:
            self.offsets.append(pos)
            pos += size
        self.pos = pos
        self.alloc_end = max(self.alloc_end, pos)

    def needs_extension(self, prealloc: int) -> bool:
        """Whether less than half the preallocation is left ahead of the write position."""
        return (
            prealloc > 0
            and self.alloc_end - self.pos < prealloc // 2
            and self.pos >= self.extend_backoff
        )

    def extension_target(self, prealloc: int) -> int:
        """Where the preallocated region should end after the next extension."""
        return self.pos + prealloc

    def extended(self, start: int, end: int, failed: bool, prealloc: int) -> None:
        """An extension from `start` to `end` finished (or failed: back off)."""
        if failed:
            self.extend_backoff = self.pos + prealloc
        elif start == self.alloc_end:
            self.alloc_end = max(self.alloc_end, end)

    def tail_range(self, seq: int) -> tuple[int, int]:
        """Byte range of the current journal holding the records after `seq`."""
        index = seq + 1 - self.first_seq
        start = self.offsets[index] if 0 <= index < len(self.offsets) else self.pos
        return start, self.pos

    def restarted(self, seq: int, tail: tuple[int, int], prealloc: int) -> None:
        """The journal was restarted holding only the bytes `tail` (the records after
        `seq`) followed by `prealloc` zeros."""
        start, end = tail
        index = seq + 1 - self.first_seq
        kept = self.offsets[index:] if index >= 0 else []
        self.offsets = [off - start for off in kept]
        self.first_seq = seq + 1
        self.pos = end - start
        self.alloc_end = self.pos + max(0, prealloc)
        self.extend_backoff = 0
