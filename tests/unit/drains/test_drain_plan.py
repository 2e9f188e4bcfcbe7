"""Drain plans, the dry run of drain_node (docs/contracts.md#drain-plans), in the pure core:
the plan's moves are the moves the drain then makes, blocked instances carry the placement
message, budgets plug in through one parameter, waves count rounds, errors are typed."""

from __future__ import annotations

import pytest
from drains_testlib import World, cluster, place
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import InvalidParams, NotFound
from luxid.drains import Submit
from luxid.drains.plan import NO_BUDGETS, PlanBudget, plan_node_drain, waves
from luxid.drains.view import ClusterView


def plan(w: World, node: str, max_parallel: int = 1, budgets: tuple[PlanBudget, ...] = NO_BUDGETS):
    return plan_node_drain(w.view, w.records.values(), node, max_parallel, place, budgets=budgets)


def drain_to_the_end(w: World, node: str, max_parallel: int) -> tuple[dict[str, str], set[str]]:
    """Run a drain with no deadline until nothing moves: {instance: target}, the blocked."""
    w.drain(node, max_parallel=max_parallel)
    for _ in range(200):
        if not w.unfinished():
            break
        w.finish_all()
        w.step()
    moves = {
        e.instance: e.node
        for e in w.log
        if isinstance(e, Submit) and e.kind == "migrate" and e.instance and e.node
    }
    return moves, set(w.records[f"node/{node}"].blocked)


def test_every_instance_gets_a_target_counting_the_planned_moves() -> None:
    w = World(cluster({"n1": 8192, "n2": 2048, "n3": 3072},
                      {f"vm{i}": ("n1", 1024) for i in range(4)} | {"big": ("n1", 4096)}))  # fmt: skip
    p = plan(w, "n1", max_parallel=2)
    assert p.node == "n1"
    # most free memory first, each planned move counted against its target's room
    assert p.moves == [["vm0", "n3"], ["vm1", "n2"], ["vm2", "n3"], ["vm3", "n2"]]
    ((name, why),) = p.blocked
    assert name == "big" and why.startswith("no node has room for big: it needs 4096 MiB")
    assert p.budgets == [] and p.waves == 2
    assert w.records == {} and w.log == []  # nothing changed


def test_plan_matches_what_the_drain_then_does() -> None:
    w = World(cluster({"n1": 8192, "n2": 2048, "n3": 3072},
                      {f"vm{i}": ("n1", 1024) for i in range(4)} | {"big": ("n1", 4096)}))  # fmt: skip
    p = plan(w, "n1", max_parallel=2)
    moved, blocked = drain_to_the_end(w, "n1", 2)
    assert moved == {name: target for name, target in p.moves}
    assert blocked == {name for name, _ in p.blocked}


def test_other_drains_shape_the_plan() -> None:
    w = World(cluster({"n1": 8192, "n2": 8192, "n3": 8192}, {"a": ("n1", 512), "b": ("n2", 512)}))
    w.drain("n2")  # n2 draining: no target; its move of b under way counts as done
    w.finish_all()
    w.step()
    p = plan(w, "n1")
    assert p.moves == [["a", "n3"]]


def test_budgets_pace_and_hold() -> None:
    w = World(cluster({"n1": 8192, "n2": 8192}, {f"web{i}": ("n1", 256) for i in range(5)}
                      | {"db0": ("n1", 256), "db1": ("n1", 256), "other": ("n2", 256)}))  # fmt: skip
    budgets = (
        PlanBudget(name="web", max_disrupted=2, members=frozenset(f"web{i}" for i in range(5))),
        PlanBudget(name="db", max_disrupted=0, members=frozenset({"db0", "db1"})),
        PlanBudget(name="elsewhere", max_disrupted=1, members=frozenset({"other"})),
    )
    p = plan(w, "n1", max_parallel=4, budgets=budgets)
    assert p.budgets == [["db", 0, 2], ["web", 2, 5]]  # only budgets with members here
    assert p.blocked == [
        ["db0", "budget db: 0 of 0 disrupted"],
        ["db1", "budget db: 0 of 0 disrupted"],
    ]
    assert [m[0] for m in p.moves] == [f"web{i}" for i in range(5)]
    assert p.waves == 3  # ceil(5 / min(4, 2))
    said = PlanBudget(
        name="db",
        max_disrupted=0,
        members=frozenset({"db0"}),
        reason="budget db: 1 of 0 disrupted (db9: down)",
    )
    assert plan(w, "n1", budgets=(said,)).blocked == [["db0", said.reason]]


@pytest.mark.parametrize(
    ("moves", "max_parallel", "paces", "expected"),
    [
        (0, 3, [], 0),
        (1, 3, [], 1),
        (7, 3, [], 3),
        (7, 5, [2, 4], 4),
        (7, 5, [0], 2),
        (6, 1, [9], 6),
    ],
)
def test_waves(moves: int, max_parallel: int, paces: list[int], expected: int) -> None:
    assert waves(moves, max_parallel, paces) == expected


def test_errors_are_typed_and_say_what_to_do() -> None:
    w = World(cluster({"n1": 1024}, {}))
    with pytest.raises(NotFound, match=r"no node named 'nope' .*lw node list"):
        plan(w, "nope")
    with pytest.raises(InvalidParams, match="max_parallel") as exc:
        plan(w, "n1", max_parallel=0)
    assert exc.value.data["param"] == "max_parallel"
    assert plan(w, "n1").waves == 0


@st.composite
def clusters(draw: st.DrawFn) -> ClusterView:
    nodes = {
        f"n{i}": draw(st.sampled_from([1024, 2048, 4096, 8192]))
        for i in range(draw(st.integers(2, 5)))
    }
    names = sorted(nodes)
    instances = {
        f"vm{i}": (draw(st.sampled_from(names)), draw(st.sampled_from([256, 512, 1024, 3072])))
        for i in range(draw(st.integers(0, 12)))
    }
    return cluster(nodes, instances)


@settings(max_examples=60, deadline=None)
@given(view=clusters(), max_parallel=st.integers(1, 4))
def test_property_the_drain_makes_exactly_the_planned_moves(
    view: ClusterView, max_parallel: int
) -> None:
    w = World(view)
    p = plan(w, "n0", max_parallel=max_parallel)
    assert len(p.moves) + len(p.blocked) == len(view.on_node("n0"))
    assert p.waves == -(-len(p.moves) // max_parallel)
    moved, blocked = drain_to_the_end(w, "n0", max_parallel)
    assert moved == {name: target for name, target in p.moves}
    assert blocked == {name for name, _ in p.blocked}
