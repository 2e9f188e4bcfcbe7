"""wconfd's state as etcd keys (wconfd.storage.etcd_keys): properties.

The operations of any sequence of lock and reservation changes, run with etcd's semantics
on a model key-value store, leave exactly the keys of the holdings the changes describe,
and decoding those keys gives the holdings back, each with the node that granted it; a
change costs what it changes (a full release is one prefix delete). A config document
stored as keys decodes to the same document.
"""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from client._server.etcd.wire import KeyValue, RequestOp
from wconfd.config import ConfigState
from wconfd.config.reservations import Release, ReleaseAll, Reserve
from wconfd.storage.etcd_keys import (
    PER_KEY_DELETES,
    Keys,
    decode_state,
    document_ops,
    lock_ops,
    reservation_ops,
)

KEYS = Keys("/lw")
OWNERS = ["job-1:10:1.5", "lw-cli:20:2.5", "odd/name:30:3.5"]
LOCKS = [f"node/n{i}" for i in range(60)] + ["cluster/BGL", "instance/a/b%c"]
MODES = ["shared", "exclusive", "release"]


def run(store: dict[bytes, bytes], ops: list[RequestOp]) -> None:
    """Apply a transaction's operations as etcd does (no key put twice: checked)."""
    puts = [op.request_put.key for op in ops if op.request_put is not None]
    assert len(puts) == len(set(puts)), "etcd refuses a key put twice in one transaction"
    for op in ops:
        if op.request_put is not None:
            store[op.request_put.key] = op.request_put.value
        elif op.request_delete_range is not None:
            d = op.request_delete_range
            if not d.range_end:
                store.pop(d.key, None)
            else:
                for key in [k for k in store if d.key <= k < d.range_end]:
                    del store[key]


def decoded(store: dict[bytes, bytes]):
    kvs = [KeyValue(key=k, value=v) for k, v in sorted(store.items())]
    return decode_state(KEYS, kvs)


change = st.tuples(
    st.sampled_from(OWNERS),
    st.lists(st.tuples(st.sampled_from(LOCKS), st.sampled_from(MODES)), max_size=70),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(change, max_size=12), st.sampled_from(["node1", "node2"]))
def test_lock_changes_leave_exactly_the_held_locks(changes, node):
    store: dict[bytes, bytes] = {}
    model: dict[str, dict[str, str]] = {}
    mirror: dict[str, set[str]] = {}
    for owner, pairs in changes:
        # A request names each lock once (docs/contracts.md#lock-rules, rule 1).
        pairs = list(dict(pairs).items())
        held = mirror.setdefault(owner, set())
        ops = lock_ops(KEYS, node, owner, pairs, held)
        run(store, ops)
        mine = model.setdefault(owner, {})
        for lock, mode in pairs:
            if mode == "release":
                mine.pop(lock, None)
            else:
                mine[lock] = mode
        assert held == set(mine)
        if not mine and any(m == "release" for _, m in pairs) and len(pairs) > 40:
            assert len([op for op in ops if op.request_delete_range]) == 1
        assert len(ops) <= len(pairs) + 1
    state = decoded(store)
    expected = {o: sorted(h.items()) for o, h in model.items() if h}
    assert {o: sorted(h) for o, h in state.locks.items()} == expected
    assert all(state.nodes[o] == node for o in expected)


reservation = st.one_of(
    st.builds(
        Reserve,
        st.sampled_from(OWNERS),
        st.sampled_from(["ip", "a/b"]),
        st.sampled_from(["1", "2/3"]),
    ),
    st.builds(
        Release,
        st.sampled_from(OWNERS),
        st.sampled_from(["ip", "a/b"]),
        st.sampled_from(["1", "2/3"]),
    ),
    st.builds(ReleaseAll, st.sampled_from(OWNERS), st.sampled_from([None, "ip", "a/b"])),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(reservation, max_size=20))
def test_reservation_changes_leave_exactly_the_reservations(records):
    store: dict[bytes, bytes] = {}
    model: set[tuple[str, str, str]] = set()
    for record in records:
        if isinstance(record, Reserve):
            if any(ns == record.namespace and v == record.value for _, ns, v in model):
                continue  # the table refuses a value another owner holds
            model.add((record.owner, record.namespace, record.value))
        elif isinstance(record, Release):
            model.discard((record.owner, record.namespace, record.value))
        else:
            model = {
                e for e in model if e[0] != record.owner or record.namespace not in (None, e[1])
            }
        run(store, reservation_ops(KEYS, "node1", record))
    assert decoded(store).reservations.entries == sorted(model)


def test_a_config_document_round_trips_through_keys():
    state = ConfigState.fresh(1000.0)
    document = state.get_config()
    store: dict[bytes, bytes] = {}
    run(store, document_ops(KEYS, document))
    again = decoded(store).config
    assert again is not None
    assert msgspec.json.encode(again) == msgspec.json.encode(document)
    assert decoded({}).config is None


@settings(max_examples=200, deadline=None)
@given(st.sets(st.sampled_from(LOCKS), min_size=1), st.sets(st.sampled_from(LOCKS), min_size=20))
def test_releasing_many_of_many_deletes_exactly_them_in_few_operations(held, released):
    owner = OWNERS[2]
    store: dict[bytes, bytes] = {}
    mirror: set[str] = set()
    run(store, lock_ops(KEYS, "node1", owner, [(lk, "shared") for lk in sorted(held)], mirror))
    ops = lock_ops(KEYS, "node1", owner, [(lk, "release") for lk in sorted(released)], mirror)
    run(store, ops)
    assert mirror == held - released
    assert {lk for lk, _ in decoded(store).locks.get(owner, [])} == held - released
    kept, gone = len(held - released), len(held & released)
    if gone and not kept:
        assert len(ops) == 1  # one prefix delete
    elif gone <= PER_KEY_DELETES:
        assert len(ops) == gone
    else:
        assert len(ops) <= kept + 1  # one range delete per run between kept locks
