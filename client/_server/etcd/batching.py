"""Packing changes into etcd transactions: pure code, no I/O.

A *change* is what must be atomic (one client's write: its puts, deletes and conditions).
Several changes may share one transaction (group commit) as long as etcd accepts it and the
result is the same as committing them one after the other:

- at most `max_ops` operations per branch and `max_ops` compares (etcd's `--max-txn-ops`,
  128 by default), and at most `max_bytes` of encoded request (etcd's
  `--max-request-bytes`, 1.5 MiB by default; the JSON size over-estimates the protobuf);
- no two puts of one key, no put inside a deleted range (etcd refuses both);
- no compare on a key that an earlier change of the same transaction writes (etcd checks
  every compare before any write, so a later change would see the value from before).

A change is never split: one that alone is too large raises `ChangeTooLarge`, since
splitting it would make it non-atomic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import msgspec

from client._server.etcd.errors import ChangeTooLarge
from client._server.etcd.wire import Compare, RequestOp

MAX_TXN_OPS = 128
MAX_TXN_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Change:
    """Operations that commit together or not at all, under their own conditions."""

    ops: tuple[RequestOp, ...]
    compares: tuple[Compare, ...] = ()


# A key range as etcd has it: (key, b"") is one key; (key, b"\0") runs to the end.
KeyRange = tuple[bytes, bytes]


def _within(key: bytes, span: KeyRange) -> bool:
    start, end = span
    if not end:
        return key == start
    return start <= key and (end == b"\0" or key < end)


def _overlap(a: KeyRange, b: KeyRange) -> bool:
    """Whether two key ranges share a key."""
    if not a[1]:
        return _within(a[0], b)
    if not b[1]:
        return _within(b[0], a)
    a_before_b_ends = b[1] == b"\0" or a[0] < b[1]
    b_before_a_ends = a[1] == b"\0" or b[0] < a[1]
    return a_before_b_ends and b_before_a_ends


@dataclass
class _Txn:
    """What one transaction under construction already holds."""

    changes: list[int] = field(default_factory=list)
    ops: int = 0
    compares: int = 0
    size: int = 0
    puts: set[bytes] = field(default_factory=set)
    deletes: list[KeyRange] = field(default_factory=list)

    def conflicts(self, change: Change) -> bool:
        for op in change.ops:
            if op.request_put is not None:
                key = op.request_put.key
                if key in self.puts or any(_within(key, d) for d in self.deletes):
                    return True
            elif op.request_delete_range is not None:
                span = (op.request_delete_range.key, op.request_delete_range.range_end)
                if any(_within(p, span) for p in self.puts):
                    return True
        for cmp in change.compares:
            span = (cmp.key, cmp.range_end)
            if any(_within(p, span) for p in self.puts) or any(
                _overlap(span, d) for d in self.deletes
            ):
                return True
        return False

    def add(self, index: int, change: Change, size: int) -> None:
        self.changes.append(index)
        self.ops += len(change.ops)
        self.compares += len(change.compares)
        self.size += size
        for op in change.ops:
            if op.request_put is not None:
                self.puts.add(op.request_put.key)
            elif op.request_delete_range is not None:
                d = op.request_delete_range
                self.deletes.append((d.key, d.range_end))


def change_size(change: Change) -> int:
    """Encoded size of a change's operations and compares, in bytes."""
    return len(msgspec.json.encode(change.ops)) + len(msgspec.json.encode(change.compares))


def pack(
    changes: Sequence[Change],
    *,
    max_ops: int = MAX_TXN_OPS,
    max_bytes: int = MAX_TXN_BYTES,
    fixed_compares: int = 1,
    fixed_bytes: int = 256,
) -> list[list[int]]:
    """Group change indexes, in order, into as few transactions as the rules above allow.

    `fixed_compares`/`fixed_bytes` are what every transaction carries besides the changes
    (the fencing compare and the envelope). Raises `ChangeTooLarge` for a change that cannot
    fit in a transaction on its own.
    """
    txns: list[_Txn] = []
    current = _Txn(compares=fixed_compares, size=fixed_bytes)
    for index, change in enumerate(changes):
        size = change_size(change)
        if (
            len(change.ops) > max_ops
            or fixed_compares + len(change.compares) > max_ops
            or fixed_bytes + size > max_bytes
        ):
            raise ChangeTooLarge(
                f"one change has {len(change.ops)} operations, {len(change.compares)} compares "
                f"and {size} bytes; an etcd transaction takes at most {max_ops} of each and "
                f"{max_bytes} bytes: raise --max-txn-ops / --max-request-bytes on the etcd "
                "members (and the store's limits), or make the change smaller"
            )
        fits = (
            current.ops + len(change.ops) <= max_ops
            and current.compares + len(change.compares) <= max_ops
            and current.size + size <= max_bytes
        )
        if current.changes and (not fits or current.conflicts(change)):
            txns.append(current)
            current = _Txn(compares=fixed_compares, size=fixed_bytes)
        current.add(index, change, size)
    if current.changes:
        txns.append(current)
    return [t.changes for t in txns]
