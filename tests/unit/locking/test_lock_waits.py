"""Property tests of `lock_waits` (docs/contracts.md#why-a-job-waits) and of the grant
times the allocation keeps for it.

States come from the same random operation sequences as test_properties.py, each
operation run at its own time (its index).  The grant times are checked against a model
kept by the test from the holdings alone (a lock whose mode appeared or changed at step i
was granted at i), and every entry against a brute-force conflict search over the held
locks (lockcore_model.conflict).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from lockcore_model import conflict, wants_of
from test_properties import Snap, cfg, op_lists, run_real

from client.api.wconfd import LockWait
from client.errors import RpcError
from wconfd.locking import LockManager, lock_key

JOBS = {"a": 1, "b": 2}  # owners a and b are jobs, c and d are other clients


def run_at(mgr: LockManager, op: tuple[Any, ...], now: float) -> None:
    """Run `op` as test_properties.run_real does, at time `now`."""
    kind, owner = op[0], op[1]
    try:
        if kind == "try":
            mgr.try_update(owner, op[2], op[3], now=now)
        elif kind == "wait":
            mgr.update_waiting(owner, op[2], op[3], since=now, now=now)
        elif kind == "withdraw":
            mgr.withdraw(owner, now=now)
        elif kind == "opp":
            mgr.opportunistic_lock_union(
                owner, op[2], op[3], priority=op[4], wait=op[5], since=now, now=now
            )
        elif kind == "free":
            mgr.free_locks(owner, now=now)
        elif kind == "free_level":
            mgr.free_locks_level(owner, op[2], now=now)
        elif kind == "downgrade":
            mgr.downgrade_locks_level(owner, op[2], now=now)
        elif kind == "intersect":
            mgr.intersect_locks(owner, op[2], now=now)
        elif kind == "set_priority":
            mgr.set_priority(owner, op[2], now=now)
        elif kind == "remove":
            mgr.remove_owner(owner, now=now)
        else:
            run_real(mgr, op)
    except RpcError:
        pass


def build_timed(op_list: list[tuple[Any, ...]]) -> tuple[LockManager, dict[tuple[str, str], float]]:
    """The manager after `op_list` (step i at time i+1), and the grant times by
    (owner, lock) as the holdings say: when each lock took its current mode."""
    mgr = LockManager()
    stamps: dict[tuple[str, str], float] = {}
    before: dict[tuple[str, str], str] = {}
    for i, op in enumerate(op_list, start=1):
        run_at(mgr, op, float(i))
        after = {(o, lk): m for o, locks in mgr.held().items() for lk, m in locks}
        for key, mode in after.items():
            if before.get(key) != mode:
                stamps[key] = float(i)
        before = after
    return mgr, {key: stamps[key] for key in before}


def holders_in_conflict(snap: Snap, owner: str, lock: str, mode: str) -> dict[str, list[str]]:
    """Brute force: other owner -> its held locks conflicting with (lock, mode)."""
    out: dict[str, list[str]] = {}
    for other, held in snap.held.items():
        if other != owner:
            names = [lk for lk, m in held.items() if conflict(lock, mode, lk, m)]
            if names:
                out[other] = names
    return out


def check_entry(
    entry: LockWait, snap: Snap, stamps: dict[tuple[str, str], float], pairs: dict[str, str]
) -> None:
    """An entry names a lock its owner asks for and exactly the holders in its way, each
    with its strongest conflicting mode and the earliest grant in that mode."""
    assert pairs.get(entry.lock) == entry.mode
    assert entry.job_id == JOBS.get(entry.owner)
    expected = holders_in_conflict(snap, entry.owner, entry.lock, entry.mode)
    assert [h.owner for h in entry.held_by] == sorted(expected)
    for holder in entry.held_by:
        names = expected[holder.owner]
        modes = [snap.held[holder.owner][lk] for lk in names]
        strongest = "exclusive" if "exclusive" in modes else "shared"
        assert holder.mode == strongest
        assert holder.job_id == JOBS.get(holder.owner)
        assert holder.since == min(
            stamps[(holder.owner, lk)] for lk in names if snap.held[holder.owner][lk] == strongest
        )


@cfg(250)
@given(op_lists)
def test_lock_waits_name_exactly_the_holders_in_the_way(op_list: list[tuple[Any, ...]]) -> None:
    mgr, stamps = build_timed(op_list)
    snap = Snap(mgr)
    waits = mgr.lock_waits(JOBS.get)
    requests = {p["client_id"]: p for p in snap.pending}
    for entry in waits:
        request = requests[entry.owner]
        assert entry.since == request["since"]
        check_entry(entry, snap, stamps, dict(map(tuple, request["request"])))
    # Completeness for queued requests: every wanted pair with a holder in its way is there.
    listed = {(e.owner, e.lock) for e in waits}
    for req in snap.queue:
        for lock, mode in wants_of(snap.held.get(req.owner, {}), req.pairs):
            blocked = bool(holders_in_conflict(snap, req.owner, lock, mode))
            assert ((req.owner, lock) in listed) == blocked
    # Entries follow the requests' rank, and lock order inside one request.
    order = [p["client_id"] for p in snap.pending]
    ranks = [(order.index(e.owner), lock_key(e.lock)) for e in waits]
    assert ranks == sorted(ranks)


@cfg(150)
@given(op_lists)
def test_grant_times_follow_the_holdings(op_list: list[tuple[Any, ...]]) -> None:
    mgr, stamps = build_timed(op_list)
    alloc = mgr.allocation
    assert {(o, lk) for o, locks in alloc.since.items() for lk in locks} == set(stamps)
    for (owner, lock), when in stamps.items():
        assert alloc.since_of(owner, lock) == when


@cfg(100)
@given(op_lists)
def test_a_restored_table_counts_every_lock_granted_at_the_restore(
    op_list: list[tuple[Any, ...]],
) -> None:
    mgr, _ = build_timed(op_list)
    restored = LockManager.restore(mgr.held(), now=1e9)
    assert restored.held() == mgr.held()
    assert all(t == 1e9 for locks in restored.allocation.since.values() for t in locks.values())
    assert restored.lock_waits(JOBS.get) == []  # nothing waits after a restore


def test_an_example_with_a_lockset_and_two_holders() -> None:
    mgr = LockManager()
    mgr.try_update("a", [["node/n1", "shared"]], now=10.0)
    mgr.try_update("c", [["node/n1", "shared"], ["node/n2", "exclusive"]], now=20.0)
    assert mgr.try_update("d", [["node/n2", "shared"]], now=25.0).blockers == ["c"]
    assert mgr.lock_waits(JOBS.get) == []  # try_update queues nothing
    update = mgr.update_waiting("b", [["node/[lockset]", "shared"]], since=30.0, now=30.0)
    assert update.pending
    (entry,) = mgr.lock_waits(JOBS.get)
    assert entry.owner == "b" and entry.job_id == 2
    assert (entry.lock, entry.mode, entry.since) == ("node/[lockset]", "shared", 30.0)
    assert [(h.owner, h.job_id, h.mode, h.since) for h in entry.held_by] == [
        ("c", None, "exclusive", 20.0)
    ]
