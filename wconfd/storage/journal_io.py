"""The blocking file I/O of a LocalStore: load, batch write with undo, preallocation,
journal restart.  Nothing here touches the store's state, so any of it may run on the
store's I/O thread; the store (store.py) decides when and accounts for the outcome.

A write is `pwritev2(RWF_DSYNC)` into already-allocated, already-synced space where the
kernel supports it (one system call; ext4 need not commit metadata), else write plus
fdatasync.  A failed write's bytes are zeroed (or truncated away) and synced again so
the journal stays as it was; if even that fails, the reason is returned as `broken`.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import time
from typing import Any, Final, Generic, NamedTuple, TypeVar

import msgspec

from client.errors import StorageError

from .errors import JournalCorruptError
from .fileops import FileOps
from .journal_format import HEADER, scan
from .seam import Loaded
from .snapshot import decode_snapshot, encode_snapshot, write_atomic

log = logging.getLogger("wconfd.storage")

S = TypeVar("S")
R = TypeVar("R")

_ZEROS: Final = bytes(1 << 20)
_UNSUPPORTED: Final = (errno.EOPNOTSUPP, errno.EINVAL, errno.ENOSYS)


class IoResult(NamedTuple):
    """Outcome of one journal write, computed off the store's state."""

    elapsed: float
    error: OSError | None
    broken: str | None
    dsync: bool


class Found(NamedTuple, Generic[S, R]):
    """What `load` found and opened: the Loaded answer, plus the open journal's fd, the
    end of its valid records, its size, the frame offsets, the seq of its first frame
    (or of the next record) and the snapshot's size."""

    loaded: Loaded[S, R]
    fd: int
    end: int
    size: int
    offsets: list[int]
    first_seq: int
    snapshot_bytes: int


class JournalFiles:
    """A store's two files (`NAME.journal`, `NAME.snapshot.json`) and the I/O on them."""

    def __init__(self, directory: str, name: str, ops: FileOps) -> None:
        self.directory = directory
        self.name = name
        self.ops = ops
        self.journal_path = os.path.join(directory, f"{name}.journal")
        self.snapshot_path = os.path.join(directory, f"{name}.snapshot.json")

    def load(self, snapshot_type: Any, decoder: msgspec.msgpack.Decoder[Any]) -> Found[Any, Any]:
        """Read the snapshot and the journal records after it, drop a torn tail, and
        open the journal for appends.  SnapshotCorruptError / JournalCorruptError when
        the stored state cannot be trusted."""
        ops = self.ops
        os.makedirs(self.directory, exist_ok=True)
        ops.unlink(self.journal_path + ".tmp")
        ops.unlink(self.snapshot_path + ".tmp")
        snapshot: Any = None
        snapshot_seq = 0
        checked = False
        raw = ops.read_file(self.snapshot_path)
        if raw is not None:
            snapshot_seq, snapshot, checked = decode_snapshot(
                self.snapshot_path, self.name, raw, snapshot_type
            )
        data = ops.read_file(self.journal_path)
        new_file = data is None
        result = scan(data or b"", self.journal_path)
        frames = result.frames
        kept = [f for f in frames if f.seq > snapshot_seq]
        if kept and kept[0].seq != snapshot_seq + 1:
            raise JournalCorruptError(
                self.journal_path,
                f"journal starts at seq {kept[0].seq} but the snapshot includes only up to "
                f"seq {snapshot_seq}: records are missing",
            )
        records: list[Any] = []
        view, decode = memoryview(data or b""), decoder.decode
        for frame in kept:
            try:
                records.append(decode(view[frame.start + HEADER.size : frame.end]))
            except msgspec.DecodeError as exc:
                raise JournalCorruptError(
                    self.journal_path, f"record seq {frame.seq} does not decode: {exc}"
                ) from None
        last_seq = kept[-1].seq if kept else snapshot_seq
        fd = ops.open(self.journal_path, os.O_RDWR | os.O_CREAT)
        try:
            size = os.fstat(fd).st_size
            end = result.end
            restart = bool(frames) and not kept
            if restart:
                end = 0  # everything is in the snapshot already: restart the journal
                frames = []
            if result.torn_bytes:
                log.warning(
                    "%s: dropping %d bytes of torn journal tail at offset %d (%s)",
                    self.journal_path,
                    result.torn_bytes,
                    result.end,
                    result.reason,
                )
            if result.torn_bytes or restart:
                ops.ftruncate(fd, end)
                ops.fsync(fd)
                size = end
            if new_file:
                ops.fsync_dir(self.directory)
        except BaseException:
            ops.close(fd)
            raise
        return Found(
            Loaded(snapshot, snapshot_seq, records, last_seq, result.torn_bytes, checked),
            fd,
            end,
            size,
            [f.start for f in frames],
            frames[0].seq if frames else last_seq + 1,
            len(raw) if raw is not None else 0,
        )

    def write_batch(
        self, fd: int, data: bytes, start: int, alloc_end: int, dsync: bool
    ) -> IoResult:
        """Write and sync one batch at `start`; on failure undo it."""
        ops = self.ops
        t0 = time.perf_counter()
        end = start + len(data)
        try:
            if dsync and end <= alloc_end:
                try:
                    ops.pwrite_dsync(fd, data, start)
                except OSError as exc:
                    if exc.errno not in _UNSUPPORTED:
                        raise
                    dsync = False
                    ops.pwrite(fd, data, start)
                    ops.fdatasync(fd)
            else:
                ops.pwrite(fd, data, start)
                ops.fdatasync(fd)
        except OSError as exc:
            broken = self._undo(fd, start, end, alloc_end)
            return IoResult(time.perf_counter() - t0, exc, broken, dsync)
        return IoResult(time.perf_counter() - t0, None, None, dsync)

    def _undo(self, fd: int, start: int, end: int, alloc_end: int) -> str | None:
        """Make a failed write's bytes invalid on disk; the reason if that failed too."""
        ops = self.ops
        try:
            zero_end = min(end, alloc_end)
            pos = start
            while pos < zero_end:
                n = min(zero_end - pos, len(_ZEROS))
                ops.pwrite(fd, memoryview(_ZEROS)[:n], pos)
                pos += n
            if end > alloc_end:
                ops.ftruncate(fd, max(start, alloc_end))
            ops.fdatasync(fd)
        except OSError as exc:
            return f"could not undo a failed journal write: {exc}"
        return None

    def extend(self, fd: int, start: int, target: int) -> tuple[int, int, OSError | None]:
        """Write zeros over [start, target) and sync; (start, new end, error)."""
        ops = self.ops
        try:
            pos = start
            while pos < target:
                n = min(target - pos, len(_ZEROS))
                ops.pwrite(fd, memoryview(_ZEROS)[:n], pos)
                pos += n
            ops.fdatasync(fd)
        except OSError as exc:
            with contextlib.suppress(OSError):
                ops.ftruncate(fd, start)
            return start, start, exc
        return start, target, None

    def rotate(
        self, fd: int, start: int, end: int, prealloc: int
    ) -> tuple[int | None, OSError | None]:
        """A new journal holding bytes [start, end) of the old one, preallocated, swapped
        in atomically.  (new fd, None) or (None, error) with the old journal untouched."""
        ops = self.ops
        tmp = self.journal_path + ".tmp"
        new_fd: int | None = None
        try:
            tail = os.pread(fd, end - start, start) if end > start else b""
            new_fd = ops.open(tmp, os.O_RDWR | os.O_CREAT | os.O_TRUNC)
            ops.pwrite(new_fd, tail + bytes(max(0, prealloc)), 0)
            ops.fsync(new_fd)
            ops.replace(tmp, self.journal_path)
            ops.fsync_dir(self.directory)
        except OSError as exc:
            if new_fd is not None:
                ops.close(new_fd)
            ops.unlink(tmp)
            return None, exc
        return new_fd, None

    def write_snapshot(self, seq: int, body: bytes, indent: int) -> int:
        """Write the snapshot of state JSON `body` at `seq` atomically; its size.
        StorageError if it could not be written (the old one stays)."""
        chunks = encode_snapshot(self.name, seq, body, indent)
        try:
            write_atomic(self.snapshot_path, chunks, self.ops)
        except OSError as exc:
            raise StorageError(f"writing the {self.name} snapshot failed: {exc}") from None
        return sum(map(len, chunks))
