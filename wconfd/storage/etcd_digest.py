"""The config's digest on etcd (client/_server/etcd/LAYOUT.md): what lets a new master
trust the objects it loads without checking each one again.

Every object a master writes passed the checks of its change when it was planned; loading
them again re-checks fields and references (at 100,000 instances most of a failover). The
master therefore keeps, in `P/config/meta`, a digest of every config key and value under
`P/config/` (meta aside), updated with each write. A load that computes the same digest
over what it read knows the objects are byte for byte those a master wrote, and builds the
state from them unchecked; any other load (a key put by hand with etcdctl, a copy cut
short, a layout without a digest) checks every object as before.

The digest is order-free, so a write changes it by what it changes: the sum, modulo
2**128, of each key-value pair's 128-bit BLAKE2b. Pure code, no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

from client._server.etcd.wire import RequestOp

_MOD = 1 << 128


def pair_hash(key: bytes, value: bytes) -> int:
    """One key-value pair's part of the digest (keys are percent-encoded: no NUL in them)."""
    return int.from_bytes(hashlib.blake2b(key + b"\0" + value, digest_size=16).digest())


class ConfigDigest:
    """The digest of the config keys as a master has them, kept as it writes."""

    def __init__(self, folder: bytes) -> None:
        self.folder = folder  # P/config/
        self.meta_key = folder + b"meta"
        self._hashes: dict[bytes, int] = {}
        self._sum = 0
        self._followed = True  # False after a write it cannot follow: it vouches for nothing

    @classmethod
    def of_puts(cls, folder: bytes, ops: Iterable[RequestOp]) -> ConfigDigest:
        """The digest of a config written whole (a fresh one, an imported copy)."""
        digest = cls(folder)
        digest.apply(ops)
        return digest

    def add(self, key: bytes, value: bytes) -> None:
        """Count a key as read (a load: each key once)."""
        h = pair_hash(key, value)
        self._hashes[key] = h
        self._sum += h

    def apply(self, ops: Iterable[RequestOp]) -> None:
        """Follow a write: its puts and deletes of config keys (the meta key and other
        folders' keys are not part of the digest).  The daemon deletes config keys one by
        one; after a range delete among them the digest vouches for nothing."""
        for op in ops:
            put, delete = op.request_put, op.request_delete_range
            if put is not None and put.key.startswith(self.folder) and put.key != self.meta_key:
                h = pair_hash(put.key, put.value)
                self._sum += h - self._hashes.get(put.key, 0)
                self._hashes[put.key] = h
            elif delete is not None and delete.key.startswith(self.folder):
                if delete.range_end:
                    self._followed = False
                self._sum -= self._hashes.pop(delete.key, 0)

    def hex(self) -> str:
        """The digest as stored in meta ("" once it vouches for nothing)."""
        return f"{self._sum % _MOD:032x}" if self._followed else ""
