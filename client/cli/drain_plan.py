"""`lw node drain NODE --dry-run` (docs/contracts.md#drain-plans): what a drain of NODE would
do now, asked of luxid (`plan_node_drain`), which changes nothing.

One table, an instance a line: the node it would move to, or why it cannot move; then the
disruption budgets that pace it, if any; then a summary line.  Exit 0 when every instance
can move, 1 when some are blocked (an unknown node is 1 too, as NotFound).
"""

from __future__ import annotations

from client.api.luxi import DrainPlan
from client.cli.context import EXIT_OK, Context, Failed
from client.cli.output import render_table

PLAN_FIELDS = ("instance", "move_to", "blocked")
BUDGET_FIELDS = ("budget", "max_disrupted", "on_node")


def plan_lines(plan: DrainPlan, max_parallel: int) -> list[str]:
    """The plan as `lw` prints it: instances by name with their target or reason, the
    budgets, and `4 moves in 2 waves (max_parallel 2), 1 blocked`."""
    rows = [[name, target, None] for name, target in plan.moves]
    rows += [[name, None, why] for name, why in plan.blocked]
    rows.sort(key=lambda row: str(row[0]))
    lines = render_table(PLAN_FIELDS, rows) if rows else [f"{plan.node} has no instances"]
    if plan.budgets:
        lines += ["", *render_table(BUDGET_FIELDS, plan.budgets)]
    lines.append(
        f"drain of {plan.node}: {len(plan.moves)} moves in {plan.waves} waves "
        f"(max_parallel {max_parallel}), {len(plan.blocked)} blocked"
    )
    return lines


def dry_run(ctx: Context, node: str, max_parallel: int) -> int:
    """Print the plan; Failed (exit 1) when some instance cannot move."""
    plan = ctx.luxi.plan_node_drain(node=node, max_parallel=max_parallel)
    for line in plan_lines(plan, max_parallel):
        ctx.out(line)
    if plan.blocked:
        raise Failed(
            f"{len(plan.blocked)} instances of {node} cannot move now (see BLOCKED); a drain "
            "would report them blocked until room appears, and fail them over or shut them "
            "down at its deadline"
        )
    return EXIT_OK
