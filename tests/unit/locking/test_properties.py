"""Property tests of the lock core: Ganeti's Allocation.hs / Waiting.hs invariants
adapted to this design, conflict-freeness (docs/contracts.md#lock-conflicts), rule 5 (no
overtaking), rule 6 (DeadlockError exactly when a cycle would form, by an independent cycle search),
and a differential run against the brute-force reference model in lockcore_model.py.

States are built from random operation sequences by owners a..d on a small lock universe
(the cluster, instance and node levels with their locksets) so that conflicts, locksets,
waiting, priorities and deadlocks all happen often.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lockcore_model import (
    STRENGTH,
    Model,
    Req,
    blocked_by,
    conflict,
    conflict_free,
    fair_blockers,
    graph,
    has_cycle,
    is_set,
    key,
    lock_blockers,
    lockset_of,
    wants_of,
)

from client.errors import (
    DeadlockError,
    InvalidParams,
    LockOrderError,
    RpcError,
)
from wconfd.locking import Allocation, Effects, LockManager, parse_request
from wconfd.locking.table import HolderIndex

OWNERS = ["a", "b", "c", "d"]
LOCKS = [
    "cluster/[lockset]",
    "cluster/BGL",
    "instance/[lockset]",
    "instance/i1",
    "node/[lockset]",
    "node/n1",
    "node/n2",
]
SMALL_UNIVERSES = [
    ["node/n1"],
    ["node/n1", "node/n2"],
    ["node/[lockset]", "node/n1", "node/n2"],
    ["cluster/BGL", "instance/i1", "node/n1"],
    ["instance/i1", "node/[lockset]", "node/n1", "node-res/r1"],
]
LEVELS_USED = ["cluster", "instance", "node"]
NEW_SEQ = 10**9

owners = st.sampled_from(OWNERS)
prios = st.sampled_from([-1, 0, 0, 1])


def make_ops(locks: list[str]) -> st.SearchStrategy[tuple[Any, ...]]:
    """Random operations on the lock universe `locks`, weighted towards contention."""
    lock = st.sampled_from(locks)
    pairs = st.tuples(lock, st.sampled_from(["shared", "exclusive", "release"])).map(list)
    acq_pairs = st.tuples(lock, st.sampled_from(["shared", "exclusive"])).map(list)
    requests = st.one_of(
        st.lists(pairs, min_size=1, max_size=3, unique_by=lambda p: p[0]),
        st.lists(pairs, min_size=2, max_size=3),  # may be inconsistent (rule 1)
        st.lists(pairs, min_size=1, max_size=3, unique_by=lambda p: p[0]),
    )
    acq_requests = st.lists(acq_pairs, min_size=1, max_size=2, unique_by=lambda p: p[0])
    try_ops = st.tuples(st.just("try"), owners, requests, prios)
    wait_ops = st.tuples(st.just("wait"), owners, acq_requests, prios)
    return st.one_of(
        try_ops,
        try_ops,
        wait_ops,
        wait_ops,
        wait_ops,
        st.tuples(st.just("wait"), owners, requests, prios),
        st.tuples(st.just("withdraw"), owners),
        st.tuples(st.just("free"), owners),
        st.tuples(st.just("free"), owners),
        st.tuples(st.just("free_level"), owners, st.sampled_from(LEVELS_USED)),
        st.tuples(st.just("downgrade"), owners, st.sampled_from(LEVELS_USED)),
        st.tuples(st.just("intersect"), owners, st.lists(lock, max_size=3)),
        st.tuples(
            st.just("opp"),
            owners,
            st.lists(acq_pairs, min_size=1, max_size=4),
            st.integers(0, 3),
            prios,
            st.booleans(),
        ),
        st.tuples(st.just("finish_opp"), owners),
        st.tuples(st.just("set_priority"), owners, prios),
        st.tuples(st.just("remove"), owners),
    )


op_lists = st.one_of(
    st.lists(make_ops(LOCKS), min_size=8, max_size=40),
    st.sampled_from(SMALL_UNIVERSES).flatmap(
        lambda locks: st.lists(make_ops(locks), min_size=8, max_size=40)
    ),
)
requests = st.lists(
    st.tuples(st.sampled_from(LOCKS), st.sampled_from(["shared", "exclusive", "release"])).map(
        list
    ),
    min_size=1,
    max_size=3,
)
acq_requests = st.lists(
    st.tuples(st.sampled_from(LOCKS), st.sampled_from(["shared", "exclusive"])).map(list),
    min_size=1,
    max_size=2,
    unique_by=lambda p: p[0],
)


def cfg(max_examples: int) -> settings:
    """Hypothesis settings for these tests: no deadline, a bounded number of examples."""
    return settings(
        deadline=None, max_examples=max_examples, suppress_health_check=[HealthCheck.too_slow]
    )


# -- running operations -------------------------------------------------------------------------


def run_real(mgr: LockManager, op: tuple[Any, ...]) -> tuple[tuple[Any, ...], Effects | None]:
    """Apply `op` to the real manager: (comparable outcome, effects)."""
    kind, owner = op[0], op[1]
    try:
        if kind in ("try", "wait", "withdraw"):
            if kind == "try":
                u = mgr.try_update(owner, op[2], op[3])
            elif kind == "wait":
                u = mgr.update_waiting(owner, op[2], op[3], since=f"t{op[3]}")
            else:
                u = mgr.withdraw(owner)
            e = u.effects
            return (
                (
                    "update",
                    u.applied,
                    u.pending,
                    u.blockers,
                    e.granted,
                    e.withdrawn,
                    e.opportunistic,
                ),
                e,
            )
        if kind == "opp":
            o = mgr.opportunistic_lock_union(owner, op[2], op[3], priority=op[4], wait=op[5])
            return ("opp", o.locks, o.waiting), o.effects
        if kind == "finish_opp":
            o = mgr.finish_opportunistic(owner)
            return ("opp", o.locks, o.waiting), o.effects
        calls: dict[str, Callable[[], Effects]] = {
            "free": lambda: mgr.free_locks(owner),
            "free_level": lambda: mgr.free_locks_level(owner, op[2]),
            "downgrade": lambda: mgr.downgrade_locks_level(owner, op[2]),
            "intersect": lambda: mgr.intersect_locks(owner, op[2]),
            "set_priority": lambda: mgr.set_priority(owner, op[2]),
            "remove": lambda: mgr.remove_owner(owner),
        }
        e = calls[kind]()
        return ("effects", e.granted, e.withdrawn, e.opportunistic), e
    except RpcError as exc:
        return ("error", type(exc).__name__), None


def run_model(model: Model, op: tuple[Any, ...]) -> tuple[Any, ...]:
    """Apply `op` to the reference model."""
    kind, owner = op[0], op[1]
    try:
        if kind == "try":
            return model.try_update(owner, op[2], op[3])
        if kind == "wait":
            return model.update_waiting(owner, op[2], op[3])
        if kind == "withdraw":
            return model.withdraw(owner)
        if kind == "opp":
            return model.opportunistic(owner, op[2], op[3], op[4], op[5])
        if kind == "finish_opp":
            return model.finish_opportunistic(owner)
        if kind == "free":
            return model.free_locks(owner)
        if kind == "free_level":
            return model.free_locks_level(owner, op[2])
        if kind == "downgrade":
            return model.downgrade_locks_level(owner, op[2])
        if kind == "intersect":
            return model.intersect_locks(owner, op[2])
        if kind == "set_priority":
            return model.set_priority(owner, op[2])
        return model.remove_owner(owner)
    except RpcError as exc:
        return ("error", type(exc).__name__)


def build(op_list: list[tuple[Any, ...]]) -> LockManager:
    """A manager after running `op_list` (errors ignored)."""
    mgr = LockManager()
    for op in op_list:
        run_real(mgr, op)
    return mgr


# -- snapshots for brute-force checks ------------------------------------------------------------


class Snap:
    """The real manager's state as plain data: held locks, queue in rank order, opp waits."""

    def __init__(self, mgr: LockManager) -> None:
        self.held_view = mgr.held()
        self.held = {o: dict(map(tuple, locks)) for o, locks in self.held_view.items()}
        self.pending = mgr.list_all_locks()["pending"]
        self.queue: list[Req] = []
        self.opp: dict[str, dict[str, str]] = {}
        for i, p in enumerate(self.pending):
            info = mgr.pending_request(p["client_id"])
            assert info is not None
            pairs = dict(map(tuple, p["request"]))
            if info["opportunistic"]:
                self.opp[p["client_id"]] = pairs
            else:
                self.queue.append(Req(p["client_id"], pairs, p["priority"], i))

    def req(self, owner: str) -> Req | None:
        return next((r for r in self.queue if r.owner == owner), None)

    def blockers(self, r: Req) -> set[str]:
        w = wants_of(self.held.get(r.owner, {}), r.pairs)
        return lock_blockers(self.held, r.owner, w) | fair_blockers(
            self.held, self.queue, r.owner, w, (r.prio, r.seq)
        )


def mode_ge(have: str | None, want: str) -> bool:
    return STRENGTH[have] >= STRENGTH[want]


def check_invariants(mgr: LockManager) -> Snap:
    """State invariants that hold after every operation."""
    s = Snap(mgr)
    held = s.held
    # Lock conflicts and Allocation 1: no two owners in conflict (so exclusive is exclusive)
    assert conflict_free(held), held
    # Allocation 15: every listed owner holds >= 1 lock
    assert all(held.values())
    # Allocation 2-5: list_all_locks is exactly the held locks with their owners and modes
    listing = mgr.list_all_locks()["locks"]
    names = [entry["name"] for entry in listing]
    assert names == sorted(names, key=key) and len(set(names)) == len(names)
    from_listing = {
        (o["client_id"], entry["name"], o["mode"]) for entry in listing for o in entry["owners"]
    }
    from_held = {(o, lk, m) for o, locks in held.items() for lk, m in locks.items()}
    assert from_listing == from_held
    assert all(entry["owners"] for entry in listing)
    for o, locks in held.items():
        assert mgr.list_locks(o) == s.held_view[o]
        assert [lk for lk, _ in s.held_view[o]] == sorted(locks, key=key)
        for lk, m in locks.items():
            for other, theirs in held.items():
                if other == o:
                    continue
                if not is_set(lk):
                    # Allocation 6: nobody else holds exclusively a lock implied by mine
                    assert theirs.get(lockset_of(lk)) != "exclusive"
                    # Allocation 7: nobody else holds a lock implied by my exclusive lock
                    if m == "exclusive":
                        assert lockset_of(lk) not in theirs
    # Waiting 7: every queued request is blocked; blockers and the wait-for graph agree with
    # the brute-force computation; the graph is acyclic (rule 6 keeps it so)
    g = graph(held, s.queue)
    assert mgr.wait_for_graph() == {o: sorted(v) for o, v in g.items()}
    for r in s.queue:
        assert g[r.owner], f"queued request of {r.owner} is grantable"
        assert mgr.blockers_of(r.owner) == sorted(g[r.owner])
        assert mgr.has_pending(r.owner)
    assert not has_cycle(g)
    # the indexes equal ones rebuilt from scratch
    fresh = HolderIndex()
    for o, locks in mgr.allocation.owned.items():
        for lk, m in locks.items():
            fresh.add(o, parse(lk), m)
    assert_same_index(fresh, mgr.allocation.index)
    fresh = HolderIndex()
    for r in s.queue:
        for lk, m in wants_of(held.get(r.owner, {}), r.pairs):
            fresh.add(r.owner, parse(lk), m)
    assert_same_index(fresh, mgr._queue.index)
    return s


def parse(name: str) -> Any:
    from wconfd.locking import parse_lock

    return parse_lock(name)


def assert_same_index(a: HolderIndex, b: HolderIndex) -> None:
    assert a.holders == b.holders
    assert a.excl == b.excl
    assert a.lvl_any == b.lvl_any
    assert a.lvl_excl == b.lvl_excl


def check_step(
    before: Snap, op: tuple[Any, ...], out: tuple[Any, ...], eff: Effects | None, mgr: LockManager
) -> Snap:
    """Properties of one operation, from the states before and after it."""
    after = check_invariants(mgr)
    kind, owner = op[0], op[1]
    pending_before = set(before.opp) | {r.owner for r in before.queue}
    if kind in ("try", "wait", "opp") and owner in pending_before:
        # Waiting 1: a pending owner's lock requests fail (rule 3; rule 1 is checked first)
        assert out in (("error", "PendingRequestError"), ("error", "InvalidParams")), out
    if kind == "wait":
        check_deadlock_iff_cycle(before, op, out)
    if eff is None:  # an error: nothing changed (atomicity, rules 1-3, 6)
        assert after.held == before.held and after.pending == before.pending
        if kind == "try" and all(m == "release" for _, m in op[2]):
            # Allocation 10: a release always succeeds (unless rule 3 or rule 1 forbid it)
            assert out[1] in ("PendingRequestError", "InvalidParams"), out
        return after
    # Effects.changed is exactly the owners whose holdings changed, each once
    owners_all = set(before.held) | set(after.held)
    changed = {o for o in owners_all if before.held.get(o) != after.held.get(o)}
    assert set(eff.changed) == changed and len(eff.changed) == len(changed)
    # Rule 7 (durable before the answer): the journalled change, replayed over the holdings before,
    # gives the holdings after, and it names only locks whose mode changed
    for o, pairs in eff.changes.items():
        replayed = dict(before.held.get(o, {}))
        for lock, mode in pairs:
            assert replayed.get(lock) != mode
            if mode == "release":
                del replayed[lock]
            else:
                replayed[lock] = mode
        assert replayed == after.held.get(o, {})
    # Allocation 8: an operation by `owner` changes others' locks only by granting their
    # waiting requests or extending their opportunistic waits
    assert changed - {owner} <= set(eff.granted) | set(before.opp)
    # Waiting 6: notified owners' requests are satisfied
    for g in eff.granted:
        r = before.req(g)
        assert r is not None, "granted an owner that was not queued"
        assert not mgr.has_pending(g) or g == owner
        for lk, m in r.pairs.items():
            have = after.held.get(g, {}).get(lk)
            assert have is None if m == "release" else have == m
        if kind != "set_priority":  # (ranks change in that step; the model covers it)
            check_not_overtaken(before, after, g, r.pairs, (r.prio, r.seq))
    if kind in ("try", "wait") and out[1]:  # applied
        mine = after.held.get(owner, {})
        for lk, m in dict(map(tuple, op[2])).items():  # Allocation 9: all pairs satisfied
            assert mine.get(lk) is None if m == "release" else mine.get(lk) == m
        check_not_overtaken(before, after, owner, dict(map(tuple, op[2])), (op[3], NEW_SEQ))
    if kind in ("try", "wait") and not out[1]:
        assert after.held == before.held  # Allocation 9: blocked -> unchanged
        if kind == "wait":  # Waiting 2: a blocked waiting request makes its owner pending
            assert out[2] and mgr.has_pending(owner) and out[3]
    if kind == "opp":
        check_opportunistic(before, after, op, out)
    return after


def check_not_overtaken(
    before: Snap, after: Snap, owner: str, pairs: dict[str, str], rank: tuple[int, int]
) -> None:
    """Rule 5: a request granted/applied in this step had no conflicting queued request ranked
    ahead of it that is still queued, unless that one is blocked by the grantee's locks."""
    mine = before.held.get(owner, {})
    w = wants_of(mine, pairs)
    still = {r.owner for r in after.queue}
    for r in before.queue:
        if r.owner == owner or r.owner not in still or (r.prio, r.seq) >= rank:
            continue
        rw = wants_of(before.held.get(r.owner, {}), r.pairs)
        if any(conflict(a, ma, b, mb) for a, ma in w for b, mb in rw):
            assert blocked_by(before.held, owner, rw), f"{owner} overtook {r.owner}"


def check_deadlock_iff_cycle(before: Snap, op: tuple[Any, ...], out: tuple[Any, ...]) -> None:
    """Rule 6 against an independent cycle search on the state before the call."""
    if out[0] == "error" and out[1] != "DeadlockError":
        return
    owner, prio = op[1], op[3]
    pairs = dict(map(tuple, op[2]))
    w = wants_of(before.held.get(owner, {}), pairs)
    found = lock_blockers(before.held, owner, w) | fair_blockers(
        before.held, before.queue, owner, w, (prio, NEW_SEQ)
    )
    if not found:
        assert out[0] == "update" and out[1], out
        return
    cycle = has_cycle(graph(before.held, [*before.queue, Req(owner, pairs, prio, NEW_SEQ)]))
    if cycle:
        assert out == ("error", "DeadlockError")
    else:
        assert out[0] == "update" and out[2] and out[3] == sorted(found)


def check_opportunistic(
    before: Snap, after: Snap, op: tuple[Any, ...], out: tuple[Any, ...]
) -> None:
    """Waiting 14/15 and min_count: never weakens, touches only what it reports, reports
    locks held in at least the requested mode."""
    owner, req, min_count = op[1], dict(map(tuple, op[2])), op[3]
    old, new = before.held.get(owner, {}), after.held.get(owner, {})
    for lk, m in old.items():  # Waiting 14: never weakens held locks
        assert mode_ge(new.get(lk), m)
    locks = out[1]
    assert locks == sorted(locks, key=key)
    for lk in set(old) | set(new):
        if lk not in locks:  # Waiting 15: locks outside the answer are unchanged...
            assert old.get(lk) == new.get(lk)
        else:  # ... and those in it are held in (at least) the requested mode
            assert mode_ge(new.get(lk), req[lk])
    if locks:
        assert len(locks) >= min_count
        assert set(locks) == {lk for lk, m in req.items() if mode_ge(new.get(lk), m)}
    elif min_count:
        assert old == new  # fewer than min_count: nothing acquired
    if not out[2]:
        assert owner not in after.opp


# -- the properties ----------------------------------------------------------------------------


def differential_run(op_list: list[tuple[Any, ...]]) -> None:
    """Run `op_list` on the manager and the brute-force model side by side, checking equal
    answers and states and every per-step property; then freeing every owner must leave the
    empty table (Allocation 14)."""
    mgr, model = LockManager(), Model()
    snap = check_invariants(mgr)
    for i, op in enumerate(op_list):
        real, eff = run_real(mgr, op)
        ref = run_model(model, op)
        assert real == ref, (i, op, real, ref)
        assert mgr.held() == model.held_view(), (i, op)
        pending = [
            (p["client_id"], p["priority"], p["request"]) for p in mgr.list_all_locks()["pending"]
        ]
        assert pending == model.pending_view(), (i, op)
        snap = check_step(snap, op, real, eff, mgr)
    for owner in mgr.owners():
        mgr.free_locks(owner)
    assert mgr.held() == {} and mgr.owners() == []
    assert mgr.list_all_locks() == {"locks": [], "pending": []}
    assert_same_index(HolderIndex(), mgr.allocation.index)
    assert_same_index(HolderIndex(), mgr._queue.index)


@cfg(250)
@given(op_lists)
def test_matches_reference_model_and_keeps_invariants(op_list: list[tuple[Any, ...]]) -> None:
    """Differential + invariants on hypothesis-shrinkable operation lists."""
    differential_run(op_list)


KIND_WEIGHTS = {
    "try": 5,
    "wait": 9,
    "withdraw": 1,
    "free": 4,
    "free_level": 1,
    "downgrade": 1,
    "intersect": 1,
    "opp": 2,
    "finish_opp": 1,
    "set_priority": 1,
    "remove": 1,
}


def random_walk(rnd: random.Random, n: int) -> list[tuple[Any, ...]]:
    """A long contended operation sequence with controlled weights (hypothesis' own list
    generation favours short, repetitive lists, which rarely build deep queues)."""
    locks = rnd.choice([LOCKS, *SMALL_UNIVERSES])
    kinds, weights = zip(*KIND_WEIGHTS.items(), strict=True)

    def request(modes: tuple[str, ...], size: int) -> list[list[str]]:
        names = rnd.sample(locks, min(len(locks), rnd.randint(1, size)))
        return [[name, rnd.choice(modes)] for name in names]

    out: list[tuple[Any, ...]] = []
    for _ in range(n):
        kind = rnd.choices(kinds, weights)[0]
        owner = rnd.choice(OWNERS)
        prio = rnd.choice([-1, 0, 0, 0, 1])
        if kind == "try":
            out.append((kind, owner, request(("shared", "exclusive", "release"), 3), prio))
        elif kind == "wait":
            out.append((kind, owner, request(("shared", "exclusive", "exclusive"), 2), prio))
        elif kind in ("free_level", "downgrade"):
            out.append((kind, owner, rnd.choice(LEVELS_USED)))
        elif kind == "intersect":
            out.append((kind, owner, rnd.sample(locks, rnd.randint(0, len(locks)))))
        elif kind == "opp":
            req = request(("shared", "exclusive"), 4)
            out.append((kind, owner, req, rnd.randint(0, 3), prio, rnd.random() < 0.6))
        elif kind == "set_priority":
            out.append((kind, owner, prio))
        else:
            out.append((kind, owner))
    return out


@cfg(150)
@given(st.integers(0, 2**32))
def test_random_walks_match_reference_model(seed: int) -> None:
    """Differential + invariants on long, contended random walks (deep queues, cascades of
    grants, deadlocks).  A plain seeded Random: hypothesis' own Random draws simple values
    that defeat the weights; a failure reports the seed."""
    differential_run(random_walk(random.Random(seed), 120))


@cfg(150)
@given(op_lists, owners, requests)
def test_allocation_blockers_are_exact(
    op_list: list[tuple[Any, ...]], owner: str, request: list[list[str]]
) -> None:
    """Allocation 8-12 on the bare allocation (no queue), Ganeti's LockAllocation: each
    reported blocker alone still blocks; once all blockers free, the request succeeds;
    success satisfies every pair; failure and other owners are untouched."""
    alloc = Allocation.restore(build(op_list).held())
    before = alloc.held()
    try:
        wants = alloc.wants(owner, parse_request(request))
        blocked = alloc.is_blocked(owner, wants)  # the O(1) check agrees with the full one
        blockers = alloc.try_update(owner, request)
        assert blocked is bool(blockers)
    except (InvalidParams, LockOrderError):
        assert alloc.held() == before
        return
    after = alloc.held()
    for o in set(before) | set(after):  # Allocation 8
        if o != owner:
            assert before.get(o) == after.get(o)
    if not blockers:
        mine = dict(map(tuple, after.get(owner, [])))
        for lk, m in dict(map(tuple, request)).items():  # Allocation 9
            assert mine.get(lk) is None if m == "release" else mine.get(lk) == m
        return
    assert after == before and blockers == sorted(set(blockers)) and owner not in blockers
    for b in blockers:  # Allocation 12: each blocker alone still blocks
        copy = Allocation.restore(before)
        for other in blockers:
            if other != b:
                copy.release_where(other, lambda _lk: True, [])
        assert copy.try_update(owner, request) == [b]
    copy = Allocation.restore(before)  # Allocation 11: all blockers free -> success
    for b in blockers:
        copy.release_where(b, lambda _lk: True, [])
    assert copy.try_update(owner, request) == []


@cfg(150)
@given(op_lists, owners, st.lists(st.sampled_from(LOCKS), min_size=1, max_size=4))
def test_release_always_succeeds(
    op_list: list[tuple[Any, ...]], owner: str, locks: list[str]
) -> None:
    """Allocation 10 (for an owner without a pending request, rule 3)."""
    mgr = build(op_list)
    mgr.withdraw(owner)
    u = mgr.try_update(owner, [[lk, "release"] for lk in locks])
    assert u.applied
    assert not set(locks) & {lk for lk, _ in mgr.list_locks(owner)}


@cfg(150)
@given(op_lists)
def test_snapshot_round_trips(op_list: list[tuple[Any, ...]]) -> None:
    """Allocation 13, Waiting 9 and 11: held() and list_all_locks() survive JSON, and
    restore(held()) holds exactly the same locks."""
    mgr = build(op_list)
    snap = mgr.held()
    decoded = msgspec.json.decode(msgspec.json.encode(snap))
    assert decoded == snap
    assert LockManager.restore(decoded).held() == snap
    assert Allocation.restore(decoded).held() == snap
    listing = mgr.list_all_locks()
    assert msgspec.json.decode(msgspec.json.encode(listing)) == listing


@cfg(100)
@given(op_lists, op_lists)
def test_restored_state_behaves_the_same(
    first: list[tuple[Any, ...]], then: list[tuple[Any, ...]]
) -> None:
    """Waiting 10: without pending requests, the manager and its restored snapshot answer
    every later operation identically."""
    mgr = build(first)
    for owner in mgr.owners():
        mgr.withdraw(owner)
    copy = LockManager.restore(mgr.held())
    for op in then:
        assert run_real(mgr, op)[0] == run_real(copy, op)[0]
        assert mgr.held() == copy.held()
        assert mgr.list_all_locks() == copy.list_all_locks()


@cfg(150)
@given(op_lists, owners, acq_requests, prios)
def test_waiting_equals_try_when_not_blocked_and_replays_are_idempotent(
    op_list: list[tuple[Any, ...]], owner: str, request: list[list[str]], prio: int
) -> None:
    """Waiting 8, 12, 13: update_waiting equals try_update unless it has to wait; an
    applied request replayed is a no-op without notifications; a queued one replayed is
    refused (rule 3) and recognised by pending_matches, changing nothing."""
    m1, m2 = build(op_list), build(op_list)
    t, _ = run_real(m1, ("try", owner, request, prio))
    w, _ = run_real(m2, ("wait", owner, request, prio))
    if t[0] == "error":
        assert w == t
        return
    if t[1]:
        assert w == t and m1.held() == m2.held()
        assert m1.list_all_locks() == m2.list_all_locks()
        again = m1.try_update(owner, request, prio)
        assert again.applied and again.effects.empty()
        again = m2.update_waiting(owner, request, prio)
        assert again.applied and again.effects.empty()
        return
    assert (w[0] == "error" and w[1] == "DeadlockError") or w[3] == t[3]
    if w[0] == "update":
        before = (m2.held(), m2.list_all_locks())
        assert m2.pending_matches(owner, request)
        assert run_real(m2, ("wait", owner, request, prio))[0] == ("error", "PendingRequestError")
        assert (m2.held(), m2.list_all_locks()) == before


@cfg(150)
@given(op_lists, owners, acq_requests, prios)
def test_waiting_request_is_granted_once_others_release(
    op_list: list[tuple[Any, ...]], owner: str, request: list[list[str]], prio: int
) -> None:
    """Waiting 3-5: once its blockers release, somebody is notified; once the blockers and
    every earlier pending owner release, the request is granted and its owner notified."""
    mgr = build(op_list)
    mgr.withdraw(owner)
    try:
        u = mgr.update_waiting(owner, request, prio)
    except (LockOrderError, DeadlockError, InvalidParams):
        return
    if not u.pending:
        return
    notified: set[str] = set()
    for b in u.blockers:  # Waiting 5
        eff = mgr.free_locks(b)
        notified |= set(eff.granted) | (set(eff.changed) - {b})
    assert notified
    granted = owner in notified
    for other in mgr.owners():  # Waiting 3/4
        if other != owner:
            granted |= owner in mgr.free_locks(other).granted
    assert granted and not mgr.has_pending(owner)
    mine = dict(map(tuple, mgr.list_locks(owner)))
    for lk, m in dict(map(tuple, request)).items():
        assert mine.get(lk) == m


@cfg(150)
@given(op_lists, st.data())
def test_free_everything_gives_the_empty_table(op_list: list[tuple[Any, ...]], data: Any) -> None:
    """Allocation 14: freeing (or removing) every owner, in any order, empties the table."""
    mgr = build(op_list)
    order = data.draw(st.permutations(mgr.owners()))
    for owner in order:
        if data.draw(st.booleans()):
            mgr.remove_owner(owner)
        else:
            mgr.free_locks(owner)
        check_invariants(mgr)
    assert mgr.held() == {} and mgr.owners() == []
    assert mgr.list_all_locks() == {"locks": [], "pending": []}
