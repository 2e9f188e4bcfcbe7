"""Drain plans (docs/contracts.md#drain-plans) through the real daemons: `plan_node_drain`
changes nothing and its moves are exactly the moves the drain then makes; its errors;
`lw node drain --dry-run` (table, exit 0 or 1) and `GET /2/nodes/<name>/drain/plan`.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_cli import Lw
from test_drains_node import add_node, create, drain_jobs, follow, placed
from test_jobproc_opcodes import run as ok
from test_rapi import Rapi, assert_error
from test_rapi import rapi as rapi  # the fixture: lw-rapi on the stack
from test_rapi import stack as stack  # the fixture: wconfd + luxid (with RAPI users)

from client import errors

pytestmark = pytest.mark.timeout(180)


def mixed_cluster(stack: Stack) -> None:
    """n1 with five instances of 1 GiB and one of 8 GiB that no other node has room for;
    n2 and n3 small enough that the planned moves have to count each other."""
    ok(stack, add_node("n1"), add_node("n2", mtotal=2048), add_node("n3", mtotal=4096))
    ok(stack, *(create(f"vm{i}", 1024, "n1") for i in range(5)), create("zbig", 8192, "n1"))


def test_the_plan_changes_nothing_and_is_what_the_drain_does(stack: Stack) -> None:
    mixed_cluster(stack)
    jobs_before = len(stack.lc.query_jobs(ids=None, fields=["id"]))
    # One wave (max_parallel 5): the drain places every move in its first pass, on the
    # view the plan read.  (With fewer at once, a later wave is placed when a slot frees,
    # on the view of that moment, which the plan can only foresee.)
    assert stack.lc.plan_node_drain(node="n1", max_parallel=2).waves == 3
    plan = stack.lc.plan_node_drain(node="n1", max_parallel=5)
    assert plan.node == "n1" and plan.budgets == [] and plan.waves == 1
    assert sorted(t for _, t in plan.moves) == ["n2", "n2", "n3", "n3", "n3"]
    ((name, why),) = plan.blocked
    assert name == "zbig" and why.startswith("no node has room for zbig: it needs 8192 MiB")
    # nothing changed: no drain, no job, the node not marked
    assert stack.lc.query_drains() == []
    assert len(stack.lc.query_jobs(ids=None, fields=["id"])) == jobs_before
    assert stack.wc.get_object(kind="node", key="n1")["drained"] is False

    stack.lc.drain_node(node="n1", deadline=None, max_parallel=5)
    status, _ = follow(
        stack, "node/n1", lambda s: s.remaining == 1 and [b[0] for b in s.blocked] == ["zbig"]
    )
    made = [
        [j["op"]["instance_name"], j["op"]["target_node"]]
        for j in drain_jobs(stack, status)
        if j["op"]["OP_ID"] == "OP_INSTANCE_MIGRATE"
    ]
    assert sorted(made) == sorted(plan.moves)
    assert {i: n for i, n in placed(stack).items() if i != "zbig"} == dict(
        (i, n) for i, n in plan.moves
    )
    assert status.blocked == [list(b) for b in plan.blocked]


def test_plan_errors_are_typed(stack: Stack) -> None:
    ok(stack, add_node("n1"))
    with pytest.raises(errors.NotFound, match="nope"):
        stack.lc.plan_node_drain(node="nope")
    with pytest.raises(errors.InvalidParams, match="max_parallel") as exc:
        stack.lc.plan_node_drain(node="n1", max_parallel=0)
    assert exc.value.data["param"] == "max_parallel"
    empty = stack.lc.plan_node_drain(node="n1")
    assert (empty.moves, empty.blocked, empty.waves) == ([], [], 0)


def test_lw_node_drain_dry_run(stack: Stack) -> None:
    lw = Lw(stack.wconfd.run_dir, stack.wconfd.state_dir)
    ok(stack, add_node("n1"), add_node("n2", mtotal=8192))
    ok(stack, create("a", 512, "n1"), create("b", 512, "n1"))
    out = lw.ok("node", "drain", "n1", "--dry-run", "--max-parallel", "2")
    lines = out.splitlines()
    assert lines[0].split() == ["INSTANCE", "MOVE_TO", "BLOCKED"]
    assert [line.split() for line in lines[1:3]] == [["a", "n2", "-"], ["b", "n2", "-"]]
    assert lines[-1] == "drain of n1: 2 moves in 1 waves (max_parallel 2), 0 blocked"
    assert stack.lc.query_drains() == []  # a dry run starts nothing
    ok(stack, create("huge", 60000, "n1"))  # n2 cannot take it
    done = lw("node", "drain", "n1", "--dry-run")
    assert done.returncode == 1, done
    assert "huge" in done.stdout and "no node has room for huge" in done.stdout
    assert "1 instances of n1 cannot move now" in done.stderr
    missing = lw("node", "drain", "nope", "--dry-run")
    assert missing.returncode == 1 and "NotFound" in missing.stderr, missing
    err = lw.fails(2, "node", "drain", "n1", "--dry-run", "--disable")
    assert "--dry-run shows what a drain would do" in err


def test_rapi_get_drain_plan(rapi: Rapi, stack: Stack) -> None:
    mixed_cluster(stack)
    plan = rapi.get("/2/nodes/n1/drain/plan?max_parallel=2")
    assert set(plan) == {"node", "moves", "blocked", "budgets", "waves"}
    assert plan == {
        "node": "n1",
        "moves": stack.lc.plan_node_drain(node="n1", max_parallel=2).moves,
        "blocked": [list(b) for b in stack.lc.plan_node_drain(node="n1").blocked],
        "budgets": [],
        "waves": 3,
    }
    assert rapi.get("/2/nodes/n1/drain/plan")["waves"] == 5  # max_parallel 1 by default
    uuid = rapi.get("/2/nodes/n1")["uuid"]
    assert rapi.get(f"/2/nodes/{uuid}/drain/plan")["node"] == "n1"
    assert_error(rapi.call("GET", "/2/nodes/n1/drain/plan?max_parallel=0"), 400, "max_parallel")
    assert_error(rapi.call("GET", "/2/nodes/n1/drain/plan?max_parallel=x"), 400, "max_parallel")
    assert_error(rapi.call("GET", "/2/nodes/nope/drain/plan"), 404, "nope")
    assert stack.lc.query_drains() == []
