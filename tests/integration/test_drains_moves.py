"""The lock plan of a drain's moves through the real daemons
(docs/contracts.md#room-on-nodes, issue 13).

OP_INSTANCE_MIGRATE and OP_INSTANCE_FAILOVER hold their source node only shared, so the
moves of a drain off one node run side by side; the room on the target is checked and
claimed under node-res/<target> exclusively, so concurrent moves onto one node never
over-fill it.  Each move waits `duration` between its room check and its write: were
the check not serialised with the other moves' writes, every move would pass it.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_drains_node import add_node, create, max_overlap, placed
from test_drains_node import stack as stack  # the fixture: wconfd + luxid
from test_jobproc_opcodes import run as ok

pytestmark = pytest.mark.timeout(180)


def move(op_id: str, name: str, target: str, duration: float) -> dict[str, Any]:
    return {"OP_ID": op_id, "instance_name": name, "target_node": target, "duration": duration}


def finish(stack: Stack, ids: list[int]) -> list[dict[str, Any]]:
    """Wait for every job; each as {status, result, exec, end}: `exec` is when its opcode
    held its locks and began to execute."""
    for job_id in ids:
        stack.wait_final(job_id, timeout=120)
    rows = stack.lc.query_jobs(ids=ids, fields=["status", "opresult", "opexec", "opend"])
    return [
        {"status": r[0], "result": r[1][0], "exec": r[2][0], "end": r[3][0]}
        for r in rows
        if r is not None
    ]


@pytest.mark.parametrize("op_id", ["OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER"])
def test_concurrent_moves_never_overfill_the_target(stack: Stack, op_id: str) -> None:
    """Ten moves of 1024 MiB at once, from two sources, onto a node with room for three:
    three succeed, seven fail saying the node has no room, and the node is not over-full."""
    ok(stack, add_node("src1"), add_node("src2"), add_node("small", mtotal=3 * 1024))
    names = [f"vm{i}" for i in range(10)]
    ok(stack, *(create(n, 1024, "src1" if i % 2 else "src2") for i, n in enumerate(names)))
    ids = [stack.submit(move(op_id, n, "small", 1.0)) for n in names]
    jobs = finish(stack, ids)
    won = [j for j in jobs if j["status"] == "success"]
    lost = [j for j in jobs if j["status"] != "success"]
    assert len(won) == 3, jobs
    assert all(j["status"] == "error" for j in lost), lost
    assert all(str(j["result"]).startswith("node small has no room for vm") for j in lost), lost
    on_small = [n for n, node in placed(stack).items() if node == "small"]
    assert sorted(on_small) == sorted(j["result"]["instance"] for j in won)
    used = sum(
        int(i["memory"])
        for i in stack.wc.list_objects(kind="instance")
        if i["name"] in on_small and i["admin_state"] == "up"
    )
    assert used == 3 * 1024


def test_moves_off_one_node_run_side_by_side(stack: Stack) -> None:
    """Four moves of 1 s off one node, each to its own target, execute at the same time:
    the source is not held exclusively (it was, and moves off one node ran one by one)."""
    ok(stack, add_node("src"), *(add_node(f"t{i}") for i in range(4)))
    ok(stack, *(create(f"vm{i}", 256, "src") for i in range(4)))
    ids = [stack.submit(move("OP_INSTANCE_MIGRATE", f"vm{i}", f"t{i}", 1.0)) for i in range(4)]
    jobs = finish(stack, ids)
    assert [j["status"] for j in jobs] == ["success"] * 4, jobs
    assert max_overlap([(j["exec"], j["end"]) for j in jobs]) >= 2, jobs
    assert placed(stack) == {f"vm{i}": f"t{i}" for i in range(4)}
