"""Group commit packing (client._server.etcd.batching): properties.

Random changes over a small key universe (puts, single-key and prefix deletes, value
compares) are packed; every transaction must be one etcd accepts (limits, no duplicate put,
no put inside a deleted range), order is kept, nothing is split, packing is greedy, and —
the point of it all — running the packed transactions with etcd's semantics (all compares
first, then all operations) ends in the same store as running the changes one by one.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client._server.etcd.batching import Change, pack
from client._server.etcd.errors import ChangeTooLarge
from client._server.etcd.wire import RequestOp, cmp_value, op_delete, op_put, prefix_end

KEYS = [b"/a", b"/a/1", b"/a/2", b"/b", b"/b/1"]
VALUES = [b"x", b"y"]

put = st.builds(lambda k, v: op_put(k, v), st.sampled_from(KEYS), st.sampled_from(VALUES))
delete = st.builds(lambda k, p: op_delete(k, prefix=p), st.sampled_from(KEYS), st.booleans())
compare = st.builds(lambda k, v: cmp_value(k, v), st.sampled_from(KEYS), st.sampled_from(VALUES))


def _ok_within(ops: list[RequestOp]) -> bool:
    """etcd's own rule for one transaction's operations (checkIntervals)."""
    puts = [op.request_put.key for op in ops if op.request_put]
    dels = [op.request_delete_range for op in ops if op.request_delete_range]
    if len(puts) != len(set(puts)):
        return False
    return not any(_in(p, d.key, d.range_end) for p in puts for d in dels)


def _in(key: bytes, start: bytes, end: bytes) -> bool:
    return key == start if not end else start <= key and (end == b"\0" or key < end)


@st.composite
def change(draw: st.DrawFn) -> Change:
    ops = draw(st.lists(st.one_of(put, delete), max_size=4).filter(_ok_within))
    return Change(tuple(ops), tuple(draw(st.lists(compare, max_size=2))))


def touches(ch: Change, key: bytes) -> bool:
    for op in ch.ops:
        if op.request_put and op.request_put.key == key:
            return True
        d = op.request_delete_range
        if d and _in(key, d.key, d.range_end):
            return True
    return False


def valid_txn(changes: list[Change], max_ops: int, fixed: int) -> bool:
    """Independent statement of what one packed transaction may hold."""
    ops = [op for c in changes for op in c.ops]
    compares = sum(len(c.compares) for c in changes)
    if len(ops) > max_ops or fixed + compares > max_ops or not _ok_within(ops):
        return False
    return not any(
        touches(earlier, cmp.key)
        for i, c in enumerate(changes)
        for cmp in c.compares
        for earlier in changes[:i]
    )


Store = dict[bytes, bytes]


def holds(store: Store, ch: Change) -> bool:
    return all(store.get(c.key) == c.value for c in ch.compares)


def apply(store: Store, ops: list[RequestOp]) -> None:
    for op in ops:
        if op.request_put:
            store[op.request_put.key] = op.request_put.value
        elif op.request_delete_range:
            d = op.request_delete_range
            for k in [k for k in store if _in(k, d.key, d.range_end)]:
                del store[k]


@settings(max_examples=300)
@given(
    st.lists(change(), max_size=12),
    st.integers(4, 9),
    st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES)),
)
def test_packing_is_valid_ordered_greedy_and_means_the_same(
    changes: list[Change], max_ops: int, initial: Store
) -> None:
    groups = pack(changes, max_ops=max_ops, fixed_compares=2)
    assert [i for g in groups for i in g] == list(range(len(changes)))
    for k, g in enumerate(groups):
        assert g and valid_txn([changes[i] for i in g], max_ops, 2)
        if k + 1 < len(groups):  # greedy: the next change could not have joined
            assert not valid_txn([changes[i] for i in [*g, groups[k + 1][0]]], max_ops, 2)

    sequential = dict(initial)
    for ch in changes:
        if holds(sequential, ch):
            apply(sequential, list(ch.ops))
    packed = dict(initial)
    for g in groups:
        members = [changes[i] for i in g]
        if all(holds(packed, ch) for ch in members):  # etcd: every compare on the state before
            apply(packed, [op for ch in members for op in ch.ops])
        else:  # FencedWriter.commit_many: then each change alone, in order
            for ch in members:
                if holds(packed, ch):
                    apply(packed, list(ch.ops))
    assert packed == sequential


def test_a_change_too_large_for_one_transaction_is_refused_not_split() -> None:
    big = Change(tuple(op_put(f"/k/{i}", "x") for i in range(11)))
    with pytest.raises(ChangeTooLarge, match="at most 10"):
        pack([Change((op_put("/a", "x"),)), big], max_ops=10)
    compares = Change((), tuple(cmp_value(f"/k/{i}", "x") for i in range(10)))
    with pytest.raises(ChangeTooLarge):
        pack([compares], max_ops=10, fixed_compares=1)
    with pytest.raises(ChangeTooLarge, match="bytes"):
        pack([Change((op_put("/a", "x" * 2000),))], max_bytes=1000)


def test_byte_limit_splits_between_changes() -> None:
    changes = [Change((op_put(f"/k/{i}", "v" * 300),)) for i in range(10)]
    groups = pack(changes, max_bytes=1500, fixed_bytes=100)
    assert len(groups) > 2 and all(len(g) <= 3 for g in groups)
    assert prefix_end(b"/k/") == b"/k0"
