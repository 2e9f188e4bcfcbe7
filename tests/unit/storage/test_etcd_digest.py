"""The config's digest on etcd (wconfd.storage.etcd_digest): properties.

Followed through any sequence of writes, the digest equals the one computed afresh over
the keys those writes leave; a load finds the config checked exactly when meta's digest is
that of what it read, so a value changed, added or removed behind the master's back (or a
meta without a digest) makes the next load check every object.
"""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st
from test_etcd_keys import KEYS, decoded, run

from client._server.etcd.wire import RequestOp, op_delete, op_put
from wconfd.config import ConfigState
from wconfd.storage.etcd_digest import ConfigDigest
from wconfd.storage.etcd_keys import Meta, config_ops, document_ops, lock_ops

FOLDER = KEYS.config
NAMES = [FOLDER + f"instance/u{i}".encode() for i in range(8)] + [FOLDER + b"cluster"]
OTHERS = [KEYS.lock("job-1:10:1.5", "node/n1"), KEYS.reservation("o:1:1", "ip", "10.0.0.1")]


def afresh(store: dict[bytes, bytes]) -> str:
    """The digest of the config keys of `store`, computed from nothing."""
    digest = ConfigDigest(FOLDER)
    for key, value in sorted(store.items()):
        if key.startswith(FOLDER) and key != KEYS.meta:
            digest.add(key, value)
    return digest.hex()


write = st.lists(
    st.one_of(
        st.tuples(st.just("put"), st.sampled_from(NAMES + OTHERS), st.binary(max_size=40)),
        st.tuples(st.just("delete"), st.sampled_from(NAMES + OTHERS), st.just(b"")),
    ),
    max_size=6,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(write, max_size=20))
def test_a_followed_digest_is_the_digest_of_the_keys_left(writes):
    store: dict[bytes, bytes] = {}
    digest = ConfigDigest(FOLDER)
    for ops in writes:
        # One key once per transaction, as etcd requires; the last write of a key wins.
        last = {key: (what, value) for what, key, value in ops}
        txn: list[RequestOp] = [
            op_put(key, value) if what == "put" else op_delete(key)
            for key, (what, value) in last.items()
        ]
        run(store, txn)
        digest.apply(txn)
        assert digest.hex() == afresh(store)


def stored_config() -> tuple[dict[bytes, bytes], ConfigState]:
    """A fresh config written whole, then a node added through a planned change."""
    state = ConfigState.fresh(1000.0)
    store: dict[bytes, bytes] = {}
    ops = document_ops(KEYS, state.get_config())
    run(store, ops)
    digest = ConfigDigest.of_puts(FOLDER, ops)
    plan = state.add_object("node", {"name": "node1"}, 1001.0)
    assert plan.record is not None
    state.apply(plan.record)
    change = config_ops(KEYS, plan.record)
    digest.apply(change)
    meta = Meta(state.serial_no, state.ctime, state.mtime, 1, digest.hex())
    run(store, [*change, op_put(KEYS.meta, msgspec.json.encode(meta))])
    # Locks are not part of the digest.
    run(store, lock_ops(KEYS, "node1", "job-1:10:1.5", [("node/node1", "shared")], set()))
    return store, state


def test_a_config_as_the_master_left_it_loads_checked():
    store, state = stored_config()
    found = decoded(store)
    assert found.checked
    assert found.digest.hex() == afresh(store)
    assert found.config is not None
    assert msgspec.json.encode(found.config) == msgspec.json.encode(state.get_config())


@given(st.sampled_from(["changed", "added", "removed", "no digest"]))
def test_a_config_changed_behind_the_master_loads_unchecked(how):
    store, _ = stored_config()
    node = next(k for k in store if k.startswith(FOLDER + b"node/"))
    if how == "changed":
        store[node] = store[node].replace(b'"node1"', b'"node9"')
    elif how == "added":
        store[FOLDER + b"node/extra"] = store[node]
    elif how == "removed":
        del store[node]
    else:
        meta = msgspec.json.decode(store[KEYS.meta], type=Meta)
        store[KEYS.meta] = msgspec.json.encode(msgspec.structs.replace(meta, digest=""))
    assert not decoded(store).checked


def test_a_range_delete_among_config_keys_ends_what_the_digest_vouches_for():
    digest = ConfigDigest(FOLDER)
    digest.apply([op_put(NAMES[0], b"{}")])
    assert digest.hex()
    digest.apply([op_delete(FOLDER + b"instance/", prefix=True)])
    assert digest.hex() == ""
