"""Drains under disruption budgets (docs/contracts.md#disruption-budgets): the drain asks the
scheduler's budget rule before it submits a move, with every drain's queued moves counted.

Random budgets over tagged instances, two drains at once and manual disruptive jobs, with
the scheduler starting jobs in queue order as the budgets allow.  After every drain pass:

- the pass never submits a move that takes a budget past `max_disrupted` (counting the
  members down, the jobs started and every drain's moves submitted and not started);
- every instance a budget holds is in the drain's `blocked` under that budget, and the
  budget would hold it still;
- once the manual jobs end and every budget allows at least one disruption, both drains
  complete: a held move is tried again when a member stops being disrupted.
"""

from __future__ import annotations

from drains_testlib import FINAL, World, cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.budgets import BudgetRecord
from luxid.drains.moves import remaining
from luxid.drains.record import held_budget

NODES = {"node1": 1 << 20, "node2": 1 << 20, "node3": 1 << 20, "node4": 1 << 20}
TAGS = ["web", "db"]


def disrupted(world: World) -> dict[str, set[str]]:
    """Per budget, its members down, disrupted by a started job, or with a drain's move
    submitted (what a drain pass must keep within the budget)."""
    book = world.book()
    queued_moves = {
        job.id
        for record in world.records.values()
        for job in record.active
        if job.kind == "migrate" and world.jobs[job.id].status == "queued"
    }
    out = {name: set(book.down[name]) for name in book.budgets}
    for job_id, facts in world.jobs.items():
        if facts.status in FINAL or (facts.status == "queued" and job_id not in queued_moves):
            continue
        instance = world.ops[job_id].get("instance_name")
        for name in book.of_instance.get(instance, ()):
            out[name].add(instance)
    return out


def drain_pass(world: World) -> None:
    before = disrupted(world)
    world.step()
    after = disrupted(world)
    for name, budget in world.book().budgets.items():
        assert len(after[name]) <= max(budget.max_disrupted, len(before[name])), name
    gate = world.gate()
    for record in world.records.values():
        if record.status != "draining":
            continue
        busy = {job.instance for job in record.active}
        for instance in remaining(record, world.view):
            blocked = record.blocked.get(instance)
            if blocked is None or instance in busy or held_budget(blocked) is None:
                continue
            assert gate is not None and gate.held_by(instance) is not None, instance


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_drains_never_submit_past_a_budget_and_finish_once_it_allows(data):
    n_inst = data.draw(st.integers(1, 10), label="instances")
    homes = data.draw(st.lists(st.sampled_from(["node1", "node2", "node3"]), min_size=n_inst,
                               max_size=n_inst))  # fmt: skip
    world = World(cluster(NODES, {f"i{k}": (homes[k], 512) for k in range(n_inst)}))
    world.tags = {
        f"i{k}": tuple(data.draw(st.lists(st.sampled_from(TAGS), max_size=2, unique=True)))
        for k in range(n_inst)
    }
    world.budgets = [
        BudgetRecord(name=tag, tags=(tag,), max_disrupted=data.draw(st.integers(0, 2)))
        for tag in TAGS
    ]
    world.drain("node1", max_parallel=data.draw(st.integers(1, 3)))
    world.drain("node2", max_parallel=data.draw(st.integers(1, 3)))
    manual: list[int] = []
    for _ in range(data.draw(st.integers(0, 30), label="events")):
        action = data.draw(st.sampled_from(["schedule", "finish", "manual", "pass"]))
        if action == "schedule":
            world.schedule()
        elif action == "finish":
            running = [i for i in world.unfinished() if world.jobs[i].status == "running"]
            if running:
                world.finish(data.draw(st.sampled_from(running)))
        elif action == "manual":
            instance = data.draw(st.sampled_from(sorted(world.view.instances)))
            manual.append(world.submit_manual(instance, "OP_INSTANCE_REPLACE_DISKS"))
        drain_pass(world)
    # The operators' jobs end, every budget allows one disruption: the drains finish.
    for job_id in manual:
        if world.jobs[job_id].status not in FINAL:
            world.finish(job_id)
    world.budgets = [
        BudgetRecord(name=b.name, tags=b.tags, max_disrupted=max(1, b.max_disrupted))
        for b in world.budgets
    ]
    for _ in range(4 * n_inst + 8):
        drain_pass(world)
        world.schedule()
        world.finish_all()
    drain_pass(world)
    for target in ("node/node1", "node/node2"):
        assert world.records[target].status == "complete", world.records[target]


def test_a_held_move_is_blocked_with_its_budget_and_another_instance_moves():
    world = World(cluster(NODES, {"web1": ("node1", 512), "web2": ("node1", 512),
                                  "db1": ("node1", 512), "web3": ("node3", 512)}))  # fmt: skip
    world.tags = {"web1": ("web",), "web2": ("web",), "web3": ("web",), "db1": ("db",)}
    world.budgets = [BudgetRecord(name="web", tags=("web",), max_disrupted=1)]
    manual = world.submit_manual("web3", "OP_INSTANCE_MIGRATE", target_node="node4")
    world.run(manual)
    world.drain("node1", max_parallel=2)
    world.finish_all("OP_NODE_SET_PARAMS")
    world.step()
    record = world.records["node/node1"]
    moving = sorted(job.instance for job in record.active)
    assert moving == ["db1"]  # web1 and web2 are held; db1 fits
    status_reason = world.gate().reason("web")
    assert status_reason == "budget web: 1 of 1 disrupted (web3: job 1 OP_INSTANCE_MIGRATE)"
    assert {n for n, b in record.blocked.items() if held_budget(b) == "web"} == {"web1", "web2"}
    assert any("web1, web2: held by budget web: 1 of 1" in text for _, _, text in record.events)
    # The manual migration ends: the next pass moves one web instance, the other waits.
    world.finish(manual)
    world.step()
    record = world.records["node/node1"]
    assert sorted(job.instance for job in record.active) == ["db1", "web1"]
    assert held_budget(record.blocked["web2"]) == "web"
