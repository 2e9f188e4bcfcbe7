"""Shared pieces of the storage tests: a toy record type and a fault-injecting FileOps."""

from __future__ import annotations

import errno
import os
from pathlib import Path
from typing import Any, TypeAlias

import msgspec

from wconfd.storage import FileOps, LocalStore


class Put(msgspec.Struct, tag="put", frozen=True):
    """Set key to value."""

    key: str
    value: int


class Delete(msgspec.Struct, tag="del", frozen=True):
    """Remove key."""

    key: str


Rec: TypeAlias = Put | Delete


def apply(state: dict[str, int], rec: Rec) -> None:
    """Apply a toy record to a dict state."""
    if isinstance(rec, Put):
        state[rec.key] = rec.value
    else:
        state.pop(rec.key, None)


def make_store(
    path: Path, ops: FileOps | None = None, **kw: Any
) -> LocalStore[dict[str, int], Rec]:
    """A toy store in `path`."""
    return LocalStore(
        path,
        "toy",
        snapshot_type=dict[str, int],
        record_type=Rec,
        file_ops=ops,
        **kw,
    )


class FaultyOps(FileOps):
    """FileOps that fails chosen calls with an errno; `partial` writes half first, `once`
    disarms a fault after it fired."""

    def __init__(self) -> None:
        self.fail: dict[str, int] = {}
        self.partial = False
        self.once = False
        self.calls: dict[str, int] = {}

    def _maybe(self, name: str, fd: int | None = None, data: Any = None, off: int = 0) -> None:
        self.calls[name] = self.calls.get(name, 0) + 1
        code = self.fail.get(name)
        if code is None:
            return
        if self.once:
            del self.fail[name]
        if self.partial and fd is not None and data is not None and len(data) > 1:
            super().pwrite(fd, memoryview(data)[: len(data) // 2], off)
        raise OSError(code, os.strerror(code))

    def pwrite(self, fd: int, data: bytes | memoryview, offset: int) -> None:
        self._maybe("pwrite", fd, data, offset)
        super().pwrite(fd, data, offset)

    def pwrite_dsync(self, fd: int, data: bytes | memoryview, offset: int) -> None:
        self._maybe("pwrite_dsync", fd, data, offset)
        super().pwrite_dsync(fd, data, offset)

    def fdatasync(self, fd: int) -> None:
        self._maybe("fdatasync")
        super().fdatasync(fd)

    def fsync(self, fd: int) -> None:
        self._maybe("fsync")
        super().fsync(fd)

    def replace(self, src: str, dst: str) -> None:
        self._maybe("replace")
        super().replace(src, dst)

    def ftruncate(self, fd: int, length: int) -> None:
        self._maybe("ftruncate")
        super().ftruncate(fd, length)


ENOSPC = errno.ENOSPC
EIO = errno.EIO
