"""Errors of durable state that is unreadable: the daemon must stop, not serve wrong state.

These never cross the wire (they happen while loading, before serving); a failed *write*
raises `client.errors.StorageError` instead, which does.
"""

from __future__ import annotations


class StorageCorruptError(Exception):
    """Stored state cannot be trusted; `path` says which file and `reason` what is wrong."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


class SnapshotCorruptError(StorageCorruptError):
    """The snapshot file is not a valid snapshot (bad JSON, wrong type, checksum mismatch)."""


class JournalCorruptError(StorageCorruptError):
    """The journal is damaged before its tail (acknowledged records lost) or has a gap."""
