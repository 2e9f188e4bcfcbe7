"""Drain plans, a dry run of `drain_node` (docs/contracts.md#drain-plans): what a drain of a
node would do now, changing nothing.

The plan asks the placement the drain uses (`moves.cluster_planner`: the same view, every
drain's move under way counted as done, no draining node a target) for each instance of
the node in the order the drain takes them, counting every planned move against its
target's room; an instance no node has room for is `blocked` with the placement's message.
So, while nothing else changes, the plan's moves are the moves the drain then makes.

Disruption budgets (docs/contracts.md#disruption-budgets) pace a drain; they come in
through one parameter, `budgets` (a `PlanBudget` per budget, from whoever keeps them).
The members of a budget with `max_disrupted` 0 are blocked with its reason and not moved;
`waves` = ceil(moves / min(max_parallel, the tightest budget with room on the node)).

Pure: plain data in, a `DrainPlan` out; no clock, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final

import msgspec

from client.api.luxi import DrainPlan
from client.errors import InvalidParams, NotFound
from luxid.drains.moves import cluster_planner
from luxid.drains.record import DrainRecord
from luxid.drains.view import ClusterView, NoRoom, Placement


class PlanBudget(msgspec.Struct, frozen=True, kw_only=True):
    """A disruption budget as a plan needs it: its name, `max_disrupted`, the names of its
    member instances, and the reason the budget rule gives for a move it holds now
    (`budget web: 0 of 0 disrupted`); empty: the plan writes that form itself."""

    name: str
    max_disrupted: int
    members: frozenset[str]
    reason: str = ""

    def held(self) -> str:
        """Why a member's move is held (a budget that allows no disruption)."""
        return self.reason or f"budget {self.name}: 0 of {self.max_disrupted} disrupted"


# No budgets are kept yet: luxid plans with none (docs/contracts.md#disruption-budgets
# plugs its budgets in as `budgets`).
NO_BUDGETS: Final[tuple[PlanBudget, ...]] = ()


def check_plan(view: ClusterView, node: str, max_parallel: int) -> None:
    """NotFound for an unknown node, InvalidParams for max_parallel < 1."""
    if node not in view.nodes:
        raise NotFound(f"no node named {node!r} (see `lw node list`)")
    if max_parallel < 1:
        raise InvalidParams(
            f"param `max_parallel`: must be >= 1 (moves at once), got {max_parallel}",
            {"param": "max_parallel"},
        )


def waves(moves: int, max_parallel: int, paces: Iterable[int]) -> int:
    """How many rounds of moves: ceil(moves / min(max_parallel, the tightest pace)).  A
    pace of 0 moves nothing (its members are blocked), so it does not count here."""
    per = min([max_parallel, *(p for p in paces if p >= 1)])
    return -(-moves // per)


def plan_node_drain(
    view: ClusterView,
    records: Iterable[DrainRecord],
    node: str,
    max_parallel: int,
    place: Placement,
    *,
    budgets: Sequence[PlanBudget],
) -> DrainPlan:
    """The plan of draining `node` now with `max_parallel` (see the module's docstring).

    `records` are the drains luxid keeps (their moves under way and draining nodes shape
    placement as in the drain's own pass); `budgets` every disruption budget.
    """
    check_plan(view, node, max_parallel)
    planner = cluster_planner(records, view, place)
    on_node = planner.view.on_node(node)
    pacing = sorted((b for b in budgets if not b.members.isdisjoint(on_node)), key=lambda b: b.name)
    holds = {name: b for b in pacing if b.max_disrupted == 0 for name in b.members}
    moves: list[list[str]] = []
    blocked: list[list[str]] = []
    for name in on_node:
        budget = holds.get(name)
        if budget is not None:
            blocked.append([name, budget.held()])
            continue
        try:
            target = planner.place(name, node)
        except NoRoom as exc:
            blocked.append([name, exc.message])
            continue
        planner.move(name, target)
        moves.append([name, target])
    return DrainPlan(
        node=node,
        moves=moves,
        blocked=blocked,
        budgets=[[b.name, b.max_disrupted, len(b.members.intersection(on_node))] for b in pacing],
        waves=waves(len(moves), max_parallel, (b.max_disrupted for b in pacing)),
    )
