"""`lw node drain NODE --dry-run` (docs/contracts.md#drain-plans) against a scripted luxid:
the table, the budgets, the summary, and the exit code."""

from __future__ import annotations

import io

import pytest
from test_drain_cli import ScriptedLuxi, run

from client.api.luxi import DrainPlan
from client.cli.context import EXIT_OK, Failed
from client.cli.drain_plan import plan_lines

PLAN = DrainPlan(
    node="n1",
    moves=[["web1", "n2"], ["web0", "n3"]],
    blocked=[["db0", "budget db: 0 of 0 disrupted"]],
    budgets=[["db", 0, 1], ["web", 1, 2]],
    waves=2,
)


def test_plan_lines_list_instances_by_name_then_budgets_then_a_summary() -> None:
    lines = plan_lines(PLAN, 4)
    assert [line.split()[:2] for line in lines[:4]] == [
        ["INSTANCE", "MOVE_TO"], ["db0", "-"], ["web0", "n3"], ["web1", "n2"]]  # fmt: skip
    assert lines[1].endswith("budget db: 0 of 0 disrupted")
    assert lines[4] == ""
    assert lines[5].split() == ["BUDGET", "MAX_DISRUPTED", "ON_NODE"]
    assert lines[-1] == "drain of n1: 2 moves in 2 waves (max_parallel 4), 1 blocked"


def test_dry_run_asks_for_the_plan_and_fails_when_something_is_blocked() -> None:
    luxi = ScriptedLuxi([])
    luxi.plan_node_drain = lambda **kw: luxi.calls.append(("plan", kw)) or PLAN  # type: ignore[method-assign]
    out = io.StringIO()
    with pytest.raises(Failed, match="1 instances of n1 cannot move now"):
        run(["node", "drain", "n1", "--dry-run", "--max-parallel", "4"], luxi, out)
    assert luxi.calls == [("plan", {"node": "n1", "max_parallel": 4})]
    assert "web0" in out.getvalue() and luxi.called("drain_node") == []
    clear = DrainPlan(node="n1", moves=[], blocked=[], budgets=[], waves=0)
    luxi.plan_node_drain = lambda **kw: clear  # type: ignore[method-assign]
    out = io.StringIO()
    code, _ = run(["node", "drain", "n1", "--dry-run"], luxi, out)
    assert code == EXIT_OK and out.getvalue().splitlines()[0] == "n1 has no instances"
