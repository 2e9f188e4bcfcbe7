"""The journal's lock records, replayed, give the lock core's table (docs/contracts.md#lock-rules,
rule 7).

Random lock operations (immediate, waiting - later granted by others' releases -,
withdrawn, freed, downgraded) run on the pure LockManager; each operation's Effects.changes
become LockChange records applied to a DurableState (as the daemon does once they are
durable), sometimes through a snapshot round trip.  The durable table must always equal
the core's.
"""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import RpcError
from wconfd.durable_state import DurableState, HeldLocks, LockChange, Snapshot
from wconfd.locking import LockManager

OWNERS = ["a", "b", "c"]
LOCKS = ["cluster/BGL", "instance/i1", "instance/i2", "node/[lockset]", "node/n1", "node/n2"]
MODES = ["shared", "exclusive", "release"]

pair = st.tuples(st.sampled_from(LOCKS), st.sampled_from(MODES))
op = st.one_of(
    st.tuples(st.just("try"), st.sampled_from(OWNERS), st.lists(pair, min_size=1, max_size=4)),
    st.tuples(st.just("wait"), st.sampled_from(OWNERS), st.lists(pair, min_size=1, max_size=3)),
    st.tuples(st.just("withdraw"), st.sampled_from(OWNERS), st.just([])),
    st.tuples(st.just("free"), st.sampled_from(OWNERS), st.just([])),
    st.tuples(st.just("downgrade"), st.sampled_from(OWNERS), st.sampled_from(["node", "instance"])),
    st.tuples(st.just("snapshot"), st.just(""), st.just([])),
)


def _table(held: dict[str, list[list[str]]]) -> dict[str, dict[str, str]]:
    return {owner: dict(map(tuple, locks)) for owner, locks in held.items()}  # type: ignore[arg-type]


@settings(max_examples=300, deadline=None)
@given(st.lists(op, max_size=40))
def test_replayed_lock_changes_equal_the_core(ops):
    mgr = LockManager()
    state = DurableState.fresh(1.0)
    for kind, owner, arg in ops:
        if kind == "snapshot":
            snap = msgspec.json.decode(state.snapshot_json(), type=Snapshot)
            state = DurableState.from_snapshot(snap)
            continue
        try:
            request = [list(p) for p in dict(arg).items()] if isinstance(arg, list) else []
            if kind == "try":
                effects = mgr.try_update(owner, request).effects
            elif kind == "wait":
                effects = mgr.update_waiting(owner, request).effects
            elif kind == "withdraw":
                effects = mgr.withdraw(owner).effects
            elif kind == "free":
                effects = mgr.free_locks(owner)
            else:
                effects = mgr.downgrade_locks_level(owner, arg)
        except RpcError:
            continue
        for who, pairs in effects.changes.items():
            state.apply(LockChange(who, pairs))
        assert state.locks == _table(mgr.held())


def test_old_whole_holdings_records_and_change_records_mix():
    state = DurableState.fresh(1.0)
    state.apply(HeldLocks("a", [("node/n1", "shared"), ("node/n2", "exclusive")]))
    state.apply(LockChange("a", [("node/n1", "release"), ("node/n3", "shared")]))
    assert state.locks == {"a": {"node/n2": "exclusive", "node/n3": "shared"}}
    state.apply(HeldLocks("a", []))
    assert state.locks == {}
