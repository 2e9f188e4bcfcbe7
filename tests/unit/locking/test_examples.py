"""Table-driven unit tests of the lock core on the examples and rules of
docs/contracts.md#locks."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from client.errors import (
    DeadlockError,
    InvalidParams,
    LockOrderError,
    PendingRequestError,
)
from wconfd.locking import Effects, LockManager, RestoreError, Update

SH, EX, REL = "shared", "exclusive", "release"


def req(*pairs: str) -> list[list[str]]:
    """ "node/a:x node/b:s node/c:r" style shorthand -> [[lock, mode]]."""
    modes = {"s": SH, "x": EX, "r": REL}
    out = []
    for p in pairs:
        name, _, m = p.rpartition(":")
        out.append([name, modes[m]])
    return out


def held(mgr: LockManager, **owners: str) -> None:
    """Give each owner its locks with try_update (asserting they are granted)."""
    for owner, spec in owners.items():
        u = mgr.try_update(owner, req(*spec.split()))
        assert u.applied, (owner, u)


def state(mgr: LockManager) -> Any:
    return mgr.held(), mgr.list_all_locks()


# -- rule 5: fairness -----------------------------------------------------------------------


def test_rule5_example_shared_request_queues_behind_exclusive_waiter() -> None:
    m = LockManager()
    held(m, A="node/n1:s")
    w = m.update_waiting("W", req("node/n1:x"), since=1.5)
    assert (w.applied, w.pending, w.blockers) == (False, True, ["A"])
    assert m.try_update("R", req("node/n1:s")).blockers == ["W"]
    r = m.update_waiting("R", req("node/n1:s"), since=2.5)
    assert (r.pending, r.blockers) == (True, ["W"])
    assert m.wait_for_graph() == {"W": ["A"], "R": ["W"]}
    eff = m.free_locks("A")
    assert eff.granted == ["W"] and eff.changed == ["A", "W"]
    assert m.blockers_of("R") == ["W"]
    eff = m.free_locks("W")
    assert eff.granted == ["R"]
    assert m.held() == {"R": [["node/n1", SH]]}


def test_rule5_exception_waiter_blocked_by_my_lock_does_not_block_me() -> None:
    m = LockManager()
    held(m, A="node/n1:s")
    assert m.update_waiting("W", req("node/n1:x")).blockers == ["A"]
    u = m.try_update("A", req("node/n1:x"))  # upgrade: W is blocked by A's own lock
    assert u.applied
    assert m.blockers_of("W") == ["A"]


@pytest.mark.parametrize(
    ("waiter_prio", "asker_prio", "blocked"),
    [(0, 0, True), (5, 0, False), (5, 5, True), (-5, 0, True), (0, 10, True), (0, -1, False)],
)
def test_rule5_priorities(waiter_prio: int, asker_prio: int, blocked: bool) -> None:
    m = LockManager()
    held(m, A="node/n1:s")
    m.update_waiting("W", req("node/n1:x"), priority=waiter_prio)
    u = m.try_update("R", req("node/n1:s"), priority=asker_prio)
    assert u.blockers == (["W"] if blocked else [])


def test_rule5_non_conflicting_waiters_do_not_block() -> None:
    m = LockManager()
    held(m, A="node/n1:s")
    m.update_waiting("W", req("node/n1:x"))
    assert m.try_update("R", req("node/n2:x")).applied
    assert m.try_update("S", req("instance/[lockset]:x")).applied
    # a lockset request conflicts with W's member request (and R's held node/n2)
    assert m.try_update("T", req("node/[lockset]:s")).blockers == ["R", "W"]
    assert m.try_update("T", req("node-res/[lockset]:s")).applied


def test_grants_follow_priority_then_arrival() -> None:
    m = LockManager()
    held(m, A="node/n1:x")
    m.update_waiting("B", req("node/n1:x"), priority=0)
    m.update_waiting("C", req("node/n1:x"), priority=-5)
    m.update_waiting("D", req("node/n1:x"), priority=0)
    assert [p["client_id"] for p in m.list_all_locks()["pending"]] == ["C", "B", "D"]
    assert m.free_locks("A").granted == ["C"]
    assert m.free_locks("C").granted == ["B"]
    assert m.free_locks("B").granted == ["D"]


def test_shared_waiters_are_granted_together_and_cascade() -> None:
    m = LockManager()
    held(m, A="node/n1:x")
    m.update_waiting("B", req("node/n1:s"))
    m.update_waiting("C", req("node/n1:s"))
    m.update_waiting("D", req("node/n1:x"))
    m.update_waiting("E", req("node/n2:x", "node/n1:s"))  # behind D
    eff = m.free_locks("A")
    assert eff.granted == ["B", "C"]
    assert m.blockers_of("D") == ["B", "C"]
    assert m.blockers_of("E") == ["D"]
    m.free_locks("B")
    assert m.free_locks("C").granted == ["D"]
    assert m.free_locks("D").granted == ["E"]


def test_waiting_request_releasing_locks_unblocks_others_in_the_same_step() -> None:
    m = LockManager()
    held(m, A="node/n1:x", B="instance/i:x")
    # B waits for node/n1 and gives up instance/i when granted; C waits for instance/i.
    m.update_waiting("B", req("instance/i:r", "node/n1:s"))
    m.update_waiting("C", req("instance/i:x"))
    eff = m.free_locks("A")
    assert eff.granted == ["B", "C"]
    assert sorted(eff.changed) == ["A", "B", "C"]


# -- rule 6: deadlock -----------------------------------------------------------------------


def test_rule6_example() -> None:
    m = LockManager()
    held(m, A="node/n1:s", B="node/n1:s")
    assert m.update_waiting("A", req("node/n1:x")).pending
    before = state(m)
    with pytest.raises(DeadlockError) as info:
        m.update_waiting("B", req("node/n1:x"))
    assert "B -> A -> B" in info.value.message
    assert info.value.data["cycle"] == ["B", "A", "B"]
    assert state(m) == before
    assert not m.has_pending("B")
    # B may still give up: then A is granted
    assert m.free_locks("B").granted == ["A"]


def test_deadlock_through_a_fairness_edge() -> None:
    m = LockManager()
    held(m, X="node/x:x", Y="instance/y:x")
    assert m.update_waiting("W", req("instance/y:x", "node/z:x")).blockers == ["Y"]
    assert m.update_waiting("X", req("node/z:x")).blockers == ["W"]  # rule 5 edge X -> W
    with pytest.raises(DeadlockError, match="Y -> X -> W -> Y"):
        m.update_waiting("Y", req("node/x:x"))
    assert m.wait_for_graph() == {"W": ["Y"], "X": ["W"]}


def test_try_update_never_deadlocks() -> None:
    m = LockManager()
    held(m, A="node/n1:s", B="node/n1:s")
    m.update_waiting("A", req("node/n1:x"))
    assert m.try_update("B", req("node/n1:x")).blockers == ["A"]


def test_priority_change_that_would_close_a_cycle_is_refused() -> None:
    m = LockManager()
    held(m, X="instance/x:x", W="node/w:x", Z="network/q:x")
    m.update_waiting("W", req("network/q:x"))  # W -> Z
    m.update_waiting("X", req("node/w:x"))  # X -> W
    m.update_waiting("C", req("instance/x:x", "network/q:x"), priority=5)
    assert m.wait_for_graph() == {"W": ["Z"], "X": ["W"], "C": ["W", "X", "Z"]}
    before = state(m)
    # ahead of W, C would gain the rule-5 edge W -> C: cycle C -> X -> W -> C
    with pytest.raises(DeadlockError, match="C -> X -> W -> C"):
        m.set_priority("C", -5)
    assert state(m) == before
    assert m.set_priority("C", 7).empty()
    assert m.list_all_locks()["pending"][-1] == {
        "client_id": "C",
        "priority": 7,
        "request": [["instance/x", EX], ["network/q", EX]],
        "since": None,
    }


def test_set_priority_can_grant() -> None:
    m = LockManager()
    held(m, A="node/n1:s")
    m.update_waiting("W", req("node/n1:x"), priority=0)
    m.update_waiting("R", req("node/n1:s"), priority=5)
    assert m.blockers_of("R") == ["W"]
    eff = m.set_priority("R", -5)  # R now ranks ahead of W: nothing blocks it
    assert eff.granted == ["R"]
    with pytest.raises(InvalidParams, match="priority"):
        m.set_priority("W", 99)


# -- rule 2: order --------------------------------------------------------------------------

ORDER_CASES = [
    # (held, request, ok)
    ("node/c:s", "node/b:s", False),
    ("node/c:s", "instance/a:x", False),
    ("node/c:s", "node/[lockset]:s", False),
    ("node/c:s", "cluster/BGL:s", False),
    ("node/c:s", "node/c:r node/b:x", False),  # H is taken before the request
    ("node/b:s node/c:s", "node/b:x", False),  # upgrading a lower lock
    ("node/b:x node/c:s", "node/b:s", True),  # downgrade
    ("node/b:s node/c:s", "node/b:s", True),  # no-op
    ("node/b:x node/c:s", "node/b:x", True),
    ("node/b:s node/c:s", "node/b:r", True),  # release
    ("node/c:s", "node/d:x node/e:s", True),
    ("", "node/e:x node/a:x cluster/BGL:s", True),  # one request is not ordered
    ("node/a:s", "node/c:x node/b:x", True),
    ("node/[lockset]:s node/z:s", "node/a:s", True),  # shared pair under any lockset
    ("node/[lockset]:x node/z:s", "node/a:x", True),  # exclusive pair under exclusive lockset
    ("node/[lockset]:s node/z:s", "node/a:x", False),
    ("node/[lockset]:s", "node/a:x", False),  # exclusive member under shared lockset
    ("node/[lockset]:x", "node/a:x", True),
    ("cluster/BGL:s node/a:s", "cluster/BGL:x", False),
    ("cluster/BGL:s node/a:s", "cluster/BGL:s", True),
    ("cluster/BGL:x node/a:s", "cluster/BGL:s", True),
    ("instance/[lockset]:x node/b:s", "nodegroup/q:x", False),  # another level's lockset
    ("network/n:s", "node-res/a:s", False),
]


@pytest.mark.parametrize(("have", "ask", "ok"), ORDER_CASES)
def test_order_rule(have: str, ask: str, ok: bool) -> None:
    m = LockManager()
    if have:
        held(m, A=have)
    before = state(m)
    if ok:
        assert m.try_update("A", req(*ask.split())).applied
    else:
        with pytest.raises(LockOrderError):
            m.try_update("A", req(*ask.split()))
        with pytest.raises(LockOrderError):
            m.update_waiting("A", req(*ask.split()))
        assert state(m) == before


def test_order_error_message() -> None:
    m = LockManager()
    held(m, A="node/c:s")
    with pytest.raises(LockOrderError) as info:
        m.try_update("A", req("node/b:s"))
    assert info.value.message.startswith(
        "requesting node/b while holding node/c; acquire locks in order"
    )
    assert info.value.data["lock"] == "node/b"
    held(m, B="node/[lockset]:s")
    with pytest.raises(
        LockOrderError, match=r"node/a exclusive while holding node/\[lockset\] shared"
    ):
        m.try_update("B", req("node/a:x"))


# -- lockset interactions (docs/contracts.md#lock-conflicts) ---------------------------------------

LOCKSET_CASES = [
    # (A holds, B asks, blockers)
    ("node/[lockset]:s", "node/a:s", []),
    ("node/[lockset]:s", "node/a:x", ["A"]),
    ("node/[lockset]:x", "node/a:s", ["A"]),
    ("node/a:s", "node/[lockset]:s", []),
    ("node/a:s", "node/[lockset]:x", ["A"]),
    ("node/a:x", "node/[lockset]:s", ["A"]),
    ("node/[lockset]:s", "node/[lockset]:s", []),
    ("node/[lockset]:s", "node/[lockset]:x", ["A"]),
    ("node/[lockset]:x", "instance/a:x", []),
    ("node/[lockset]:x", "node-res/a:x", []),
    ("cluster/[lockset]:s", "cluster/BGL:x", ["A"]),
    ("cluster/BGL:s", "cluster/BGL:s", []),
    ("cluster/BGL:s", "cluster/BGL:x", ["A"]),
    ("node/a:s node/b:x", "node/[lockset]:s", ["A"]),
]


@pytest.mark.parametrize(("a_holds", "b_asks", "blockers"), LOCKSET_CASES)
def test_lockset_conflicts(a_holds: str, b_asks: str, blockers: list[str]) -> None:
    m = LockManager()
    held(m, A=a_holds)
    before = state(m)
    u = m.try_update("B", req(*b_asks.split()))
    assert u.blockers == blockers
    assert u.applied is (not blockers)
    if blockers:
        assert state(m) == before


def test_blockers_sorted_and_unique() -> None:
    m = LockManager()
    held(m, C="node/a:s", A="node/b:s", B="node/[lockset]:s")
    m.try_update("C", req("node/c:s"))
    assert m.try_update("Z", req("node/[lockset]:x", "node/a:x")).blockers == ["A", "B", "C"]


def test_owner_never_conflicts_with_itself() -> None:
    m = LockManager()
    held(m, A="node/[lockset]:x node/a:x")
    assert m.try_update("A", req("node/b:x")).applied
    assert m.list_locks("A") == [["node/[lockset]", EX], ["node/a", EX], ["node/b", EX]]


# -- upgrades / downgrades / releases ----------------------------------------------------------


def test_upgrade_and_downgrade() -> None:
    m = LockManager()
    held(m, A="node/n1:s")
    assert m.try_update("A", req("node/n1:x")).applied
    assert m.list_locks("A") == [["node/n1", EX]]
    assert m.try_update("B", req("node/n1:s")).blockers == ["A"]
    assert m.try_update("A", req("node/n1:s")).effects.changed == ["A"]  # downgrade
    held(m, B="node/n1:s")
    assert m.try_update("A", req("node/n1:x")).blockers == ["B"]
    m.update_waiting("A", req("node/n1:x"))
    eff = m.try_update("B", req("node/n1:r")).effects
    assert eff.granted == ["A"] and eff.changed == ["B", "A"]


def test_downgrade_locks_level_wakes_shared_waiters() -> None:
    m = LockManager()
    held(m, A="node/[lockset]:x node/a:x instance/i:x")
    m.update_waiting("B", req("node/b:s"))
    eff = m.downgrade_locks_level("A", "node")
    assert eff.granted == ["B"]
    assert m.list_locks("A") == [["instance/i", EX], ["node/[lockset]", SH], ["node/a", SH]]
    assert m.downgrade_locks_level("A", "node").empty()
    with pytest.raises(InvalidParams, match="unknown lock level 'nodes'"):
        m.downgrade_locks_level("A", "nodes")


def test_free_level_and_intersect() -> None:
    m = LockManager()
    held(m, A="cluster/BGL:s instance/i:x node/a:x node/b:s")
    m.free_locks_level("A", "node")
    assert m.list_locks("A") == [["cluster/BGL", SH], ["instance/i", EX]]
    eff = m.intersect_locks("A", ["instance/i", "node/zzz"])
    assert eff.changed == ["A"]
    assert m.list_locks("A") == [["instance/i", EX]]
    with pytest.raises(InvalidParams, match="unknown lock level"):
        m.intersect_locks("A", ["bogus/x"])
    assert m.list_locks("A") == [["instance/i", EX]]
    assert m.intersect_locks("A", ["instance/i"]).empty()


def test_release_always_applies_and_no_ops_have_no_effect() -> None:
    m = LockManager()
    held(m, B="node/a:x")
    u = m.try_update("A", req("node/a:r", "node/zz:r"))
    assert u.applied and u.effects.empty()
    held(m, A="node/b:x")
    assert m.try_update("A", req("node/b:x")).effects.empty()
    assert m.try_update("A", req("node/b:x")) == Update(
        applied=True, pending=False, blockers=[], effects=Effects()
    )
    assert m.update_waiting("A", req("node/b:x")).applied


# -- rule 3: pending ----------------------------------------------------------------------------


def test_rule3_pending_blocks_other_requests_until_withdrawn() -> None:
    m = LockManager()
    held(m, A="node/n1:x", W="cluster/BGL:s")
    m.update_waiting("W", req("node/n1:x"), since=7.0)
    before = state(m)
    for call in (
        lambda: m.try_update("W", req("node/n9:x")),
        lambda: m.try_update("W", req("cluster/BGL:r")),
        lambda: m.update_waiting("W", req("node/n1:x")),
        lambda: m.opportunistic_lock_union("W", req("node/n5:x")),
    ):
        with pytest.raises(PendingRequestError):
            call()
    assert state(m) == before
    assert m.pending_matches("W", req("node/n1:x"))
    assert not m.pending_matches("W", req("node/n1:s"))
    assert m.pending_request("W") == {
        "priority": 0,
        "request": [["node/n1", EX]],
        "since": 7.0,
        "opportunistic": False,
    }
    eff = m.free_locks_level("W", "cluster")
    assert eff.withdrawn == {"W": ["A"]} and eff.changed == ["W"]
    assert not m.has_pending("W")
    assert m.try_update("W", req("node/n9:x")).applied


def test_withdraw_returns_blockers_and_wakes_requests_it_blocked() -> None:
    m = LockManager()
    held(m, A="node/n1:s")
    m.update_waiting("W", req("node/n1:x"))
    m.update_waiting("R", req("node/n1:s"))
    u = m.withdraw("W")
    assert (u.applied, u.pending, u.blockers) == (False, False, ["A"])
    assert u.effects.granted == ["R"]
    assert m.withdraw("W") == Update(applied=False, pending=False, blockers=[], effects=Effects())


def test_remove_owner_releases_and_wakes() -> None:
    m = LockManager()
    held(m, A="node/n1:s instance/a:x", B="node/n1:s")
    m.update_waiting("A", req("node/n1:x"))
    m.update_waiting("C", req("instance/a:s"))
    eff = m.remove_owner("A")
    assert (eff.granted, eff.withdrawn, eff.changed) == (["C"], {"A": ["B"]}, ["A", "C"])
    assert m.owners() == ["B", "C"]


def test_intersect_withdraws_pending() -> None:
    m = LockManager()
    held(m, A="node/n1:x", B="instance/b:x")
    m.update_waiting("B", req("node/n1:x"))
    eff = m.intersect_locks("B", ["instance/b"])
    assert eff.withdrawn == {"B": ["A"]} and eff.changed == []
    assert m.list_locks("B") == [["instance/b", EX]]


# -- opportunistic union ----------------------------------------------------------------------


def test_opportunistic_union_takes_what_is_free() -> None:
    m = LockManager()
    held(m, A="node/b:x")
    o = m.opportunistic_lock_union("B", req("node/a:x", "node/b:x", "node/c:s"))
    assert (o.locks, o.waiting, o.effects.changed) == (["node/a", "node/c"], False, ["B"])


@pytest.mark.parametrize(
    ("min_count", "locks"),
    [(0, ["node/a", "node/c"]), (2, ["node/a", "node/c"]), (3, []), (4, [])],
)
def test_opportunistic_min_count(min_count: int, locks: list[str]) -> None:
    m = LockManager()
    held(m, A="node/b:x")
    before = state(m)
    o = m.opportunistic_lock_union("B", req("node/a:x", "node/b:x", "node/c:s"), min_count)
    assert o.locks == locks
    if not locks:
        assert state(m) == before and o.effects.empty()


def test_opportunistic_counts_locks_already_held_and_never_weakens() -> None:
    m = LockManager()
    held(m, B="node/a:x node/b:s", A="node/c:x")
    o = m.opportunistic_lock_union("B", req("node/a:s", "node/b:x", "node/c:s", "node/d:s"), 3)
    assert o.locks == ["node/a", "node/b", "node/d"]
    assert m.list_locks("B") == [["node/a", EX], ["node/b", EX], ["node/d", SH]]


def test_opportunistic_order_against_locks_held_before() -> None:
    m = LockManager()
    held(m, B="node/m:s")
    o = m.opportunistic_lock_union("B", req("node/z:x", "node/a:x", "node/n:s"))
    assert o.locks == ["node/n", "node/z"]  # node/a < node/m: skipped, not an error
    held(m, C="instance/[lockset]:s instance/x:s")
    assert m.opportunistic_lock_union("C", req("instance/a:s", "instance/b:x")).locks == [
        "instance/a"
    ]


def test_opportunistic_respects_rule5_and_rejects_release() -> None:
    m = LockManager()
    held(m, A="node/a:s")
    m.update_waiting("W", req("node/a:x"))
    assert m.opportunistic_lock_union("B", req("node/a:s", "node/b:s")).locks == ["node/b"]
    with pytest.raises(InvalidParams, match="allowed: shared, exclusive"):
        m.opportunistic_lock_union("C", req("node/a:r"))
    with pytest.raises(InvalidParams, match="min_count"):
        m.opportunistic_lock_union("C", req("node/a:s"), -1)


def test_opportunistic_wait_extends_on_release() -> None:
    m = LockManager()
    held(m, A="node/b:x node/c:x")
    o = m.opportunistic_lock_union(
        "B", req("node/a:x", "node/b:x", "node/c:x"), wait=True, since=3.0
    )
    assert (o.locks, o.waiting) == (["node/a"], True)
    assert m.has_pending("B") and m.blockers_of("B") == ["A"]
    assert m.wait_for_graph() == {}  # not in the graph
    assert m.list_all_locks()["pending"] == [
        {
            "client_id": "B",
            "priority": 0,
            "request": [["node/a", EX], ["node/b", EX], ["node/c", EX]],
            "since": 3.0,
        }
    ]
    eff = m.try_update("A", req("node/b:r")).effects
    assert eff.changed == ["A", "B"] and eff.opportunistic == {}
    eff = m.free_locks("A")
    assert eff.opportunistic == {"B": ["node/a", "node/b", "node/c"]}
    assert not m.has_pending("B")


def test_opportunistic_wait_with_min_count_acquires_nothing_until_enough() -> None:
    m = LockManager()
    held(m, A="node/b:x", C="node/c:x")
    o = m.opportunistic_lock_union("B", req("node/a:x", "node/b:x", "node/c:x"), 2, wait=True)
    assert (o.locks, o.waiting) == ([], True)
    assert m.list_locks("B") == []
    eff = m.free_locks("A")
    assert eff.changed == ["A", "B"] and "B" not in eff.opportunistic
    assert m.list_locks("B") == [["node/a", EX], ["node/b", EX]]
    fin = m.finish_opportunistic("B")
    assert (fin.locks, fin.waiting) == (["node/a", "node/b"], False)
    assert not m.has_pending("B")


def test_opportunistic_wait_times_out_with_nothing() -> None:
    m = LockManager()
    held(m, A="node/b:x")
    m.opportunistic_lock_union("B", req("node/a:x", "node/b:x"), 2, wait=True)
    assert m.finish_opportunistic("B").locks == []
    assert m.held() == {"A": [["node/b", EX]]}
    assert m.finish_opportunistic("B").locks == []


def test_opportunistic_wait_dropped_by_free_reports_result() -> None:
    m = LockManager()
    held(m, A="node/b:x", B="cluster/BGL:s")
    m.opportunistic_lock_union("B", req("node/a:x", "node/b:x"), wait=True)
    eff = m.free_locks_level("B", "cluster")
    assert eff.opportunistic == {"B": ["node/a"]}
    assert m.withdraw("B").blockers == []


# -- listing, snapshots, restore ----------------------------------------------------------------


def test_list_all_locks_shape_and_json() -> None:
    m = LockManager()
    held(m, B="node/[lockset]:s node/a:s", A="node/a:s cluster/BGL:s")
    m.update_waiting("C", req("node/a:x"), priority=-3, since=12.25)
    listing = m.list_all_locks()
    assert listing == {
        "locks": [
            {"name": "cluster/BGL", "owners": [{"client_id": "A", "mode": SH}]},
            {"name": "node/[lockset]", "owners": [{"client_id": "B", "mode": SH}]},
            {
                "name": "node/a",
                "owners": [{"client_id": "A", "mode": SH}, {"client_id": "B", "mode": SH}],
            },
        ],
        "pending": [
            {"client_id": "C", "priority": -3, "request": [["node/a", EX]], "since": 12.25}
        ],
    }
    assert msgspec.json.decode(msgspec.json.encode(listing)) == listing
    assert m.owners() == ["A", "B", "C"]
    pending = m.pending_request("C")
    assert pending is not None and pending["priority"] == -3
    assert m.list_locks("A") == [["cluster/BGL", SH], ["node/a", SH]]
    assert m.pending_request("A") is None


def test_held_snapshot_restore() -> None:
    m = LockManager()
    held(m, B="node/[lockset]:s node/a:s", A="node-res/b:x cluster/BGL:s")
    m.update_waiting("C", req("node-res/b:x"))
    snap = m.held()
    assert snap == {
        "A": [["cluster/BGL", SH], ["node-res/b", EX]],
        "B": [["node/[lockset]", SH], ["node/a", SH]],
    }
    r = LockManager.restore(msgspec.json.decode(msgspec.json.encode(snap)))
    assert r.held() == snap and r.list_all_locks()["pending"] == []
    assert r.try_update("C", req("node-res/b:x")).blockers == ["A"]
    assert r.try_update("C", req("node/c:x")).blockers == ["B"]


@pytest.mark.parametrize(
    "snap",
    [
        {"A": [["node/a", EX]], "B": [["node/a", SH]]},
        {"A": [["node/[lockset]", SH]], "B": [["node/a", EX]]},
        {"A": [["node/a", "release"]]},
        {"A": [["bogus/a", SH]]},
        {"A": [["node/a", SH], ["node/a", EX]]},
        {"": [["node/a", SH]]},
        [["A", [["node/a", SH]]]],
    ],
)
def test_restore_rejects_bad_snapshots(snap: Any) -> None:
    with pytest.raises(RestoreError):
        LockManager.restore(snap)


def test_bad_inputs_are_invalid_params_and_change_nothing() -> None:
    m = LockManager()
    held(m, A="node/a:x")
    before = state(m)
    for call in (
        lambda: m.try_update("A", [["node/b", "exclusive"], ["node/b", "shared"]]),
        lambda: m.try_update("A", [["nodes/b", "exclusive"]]),
        lambda: m.try_update("A", [["node/b", "owned"]]),
        lambda: m.try_update("A", req("node/b:x"), priority=20),
        lambda: m.update_waiting("A", req("node/b:x"), priority=-21),
        lambda: m.update_waiting("A", "node/b"),
        lambda: m.free_locks_level("A", "bogus"),
        lambda: m.opportunistic_lock_union("A", req("node/b:x"), priority=100),
    ):
        with pytest.raises(InvalidParams):
            call()
    assert state(m) == before
