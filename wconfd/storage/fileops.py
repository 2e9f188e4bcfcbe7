"""The system calls the store makes, in one small class so tests can inject faults.

Subclass `FileOps` and override a method to raise `OSError(errno.ENOSPC, ...)` (or EIO) to
simulate a full or failing disk; pass the instance as `LocalStore(..., file_ops=...)`.
"""

from __future__ import annotations

import contextlib
import os

_RWF_DSYNC: int | None = getattr(os, "RWF_DSYNC", None)


class FileOps:
    """Thin wrappers over `os`; every write loops until all bytes are written."""

    def open(self, path: str, flags: int, mode: int = 0o640) -> int:
        """os.open."""
        return os.open(path, flags, mode)

    def close(self, fd: int) -> None:
        """os.close."""
        os.close(fd)

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> None:
        """Write all of `data` at `offset` (no sync)."""
        view = memoryview(data)
        while view:
            n = os.pwrite(fd, view, offset)
            if n <= 0:
                raise OSError(0, "short write")
            view = view[n:]
            offset += n

    def pwrite_dsync(self, fd: int, data: bytes | memoryview, offset: int) -> None:
        """Write all of `data` at `offset`, each chunk durable when the call returns
        (pwritev2 with RWF_DSYNC: one system call instead of pwrite + fdatasync)."""
        if _RWF_DSYNC is None:
            self.pwrite(fd, data, offset)
            self.fdatasync(fd)
            return
        view = memoryview(data)
        while view:
            n = os.pwritev(fd, [view], offset, _RWF_DSYNC)
            if n <= 0:
                raise OSError(0, "short write")
            view = view[n:]
            offset += n

    def fdatasync(self, fd: int) -> None:
        """os.fdatasync (data and the metadata needed to read it, e.g. the size)."""
        os.fdatasync(fd)

    def fsync(self, fd: int) -> None:
        """os.fsync."""
        os.fsync(fd)

    def ftruncate(self, fd: int, length: int) -> None:
        """os.ftruncate."""
        os.ftruncate(fd, length)

    def replace(self, src: str, dst: str) -> None:
        """os.replace (atomic rename within a directory)."""
        os.replace(src, dst)

    def fsync_dir(self, path: str) -> None:
        """fsync a directory so a rename or a new file in it is durable."""
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def unlink(self, path: str) -> None:
        """os.unlink, ignoring a missing file."""
        with contextlib.suppress(FileNotFoundError):
            os.unlink(path)

    def read_file(self, path: str) -> bytes | None:
        """The whole file, or None if it does not exist."""
        try:
            with open(path, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None


def dsync_supported() -> bool:
    """Whether this platform has pwritev2 RWF_DSYNC."""
    return _RWF_DSYNC is not None
