"""Properties of the node drain core (docs/contracts.md#node-drain) over random histories.

A random cluster, one or two drains, and a random sequence of events — jobs starting,
succeeding or failing, nodes added, instances stopped or removed, time passing past the
deadline, strategy updates, cancels, luxid dying in a pass after carrying out some of its
effects but before writing the records (it then finds its jobs again by their reason
tags) — with the core's effects applied as luxid would.
After every pass:

- the core never submits a migration that makes more than max_parallel unfinished;
- no instance ever has two unfinished jobs, and none is moved twice;
- a drain becomes complete (without deadline) iff no instance is left on its node and no
  job of it is unfinished;
- after the deadline every instance still on the node has been acted on (a job under
  way, a failover or shutdown tried, or it is stopped and no node can take it);
- the record survives its trip through JSON (wconfd stores it);
- the core reaches quiescence (no effects) in a bounded number of passes: no retry loop.
"""

from __future__ import annotations

from collections import Counter

import msgspec
from drains_testlib import FINAL, World, cluster
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from luxid.drains import DrainRecord, Submit
from luxid.drains.moves import remaining

ACTIONS = st.sampled_from(
    ["run", "finish", "finish", "finish", "fail", "add_node", "stop", "remove", "advance",
     "update", "cancel", "step"]
)  # fmt: skip


def step(world: World) -> None:
    before = {t: r.status for t, r in world.records.items()}
    check(world, world.step(), before)


def check(world: World, effects: list, before: dict[str, str] | None = None) -> None:
    """The invariants after a pass; `before`: each drain's status before it."""
    submitted = Counter(e.target for e in effects if isinstance(e, Submit) and e.kind == "migrate")
    for target, record in world.records.items():
        # what wconfd stores and a restarted luxid reads back is the same record
        assert msgspec.json.decode(msgspec.json.encode(record), type=DrainRecord) == record
        migrating = [j for j in record.active if j.kind == "migrate"]
        if submitted[target]:
            assert len(migrating) <= record.max_parallel, (target, record.max_parallel)
        left = remaining(record, world.view)
        # (the undrain job of a drain disabled after it completed is not part of the drain)
        unfinished = [j for j in record.active if j.kind != "undrained"]
        just_completed = record.status == "complete" and (before or {}).get(target) != "complete"
        if just_completed and not record.deadline_reached:
            assert not left and not unfinished
        assert all(j.unfinished for j in record.active)
        assert not any(j.unfinished for j in record.done)
        marks = [j for j in record.all_jobs() if j.kind == "drained"]
        if (
            record.status == "draining"
            and marks
            and not marks[-1].unfinished
            and not left
            and not unfinished
        ):
            raise AssertionError(f"{target} should be complete")
        if (
            record.status == "draining"
            and record.deadline_reached
            and marks
            and not (marks[-1].unfinished)
        ):
            tried = {(j.kind, j.instance) for j in record.all_jobs()}
            busy = {j.instance for j in unfinished}
            for name in left:
                inst = world.view.instances[name]
                assert (
                    name in busy
                    or ("failover", name) in tried
                    or ("shutdown", name) in tried
                    or (inst.admin_state != "up" and name in record.blocked)
                ), (name, record)
    per_instance = Counter(
        world.ops[i].get("instance_name")
        for i, facts in world.jobs.items()
        if facts.status not in FINAL and "instance_name" in world.ops[i]
    )
    assert all(n <= 1 for n in per_instance.values()), per_instance
    moved = Counter(
        world.ops[i]["instance_name"]
        for i, facts in world.jobs.items()
        if facts.status == "success"
        and world.ops[i]["OP_ID"] in ("OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER")
    )
    assert all(n <= 1 for n in moved.values()), moved


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_random_histories_keep_the_drain_invariants(data):
    n_inst = data.draw(st.integers(0, 8), label="instances")
    memories = data.draw(st.lists(st.sampled_from([512, 1024, 4096]), min_size=n_inst,
                                  max_size=n_inst))  # fmt: skip
    homes = data.draw(st.lists(st.sampled_from(["node1", "node2"]), min_size=n_inst,
                               max_size=n_inst))  # fmt: skip
    world = World(
        cluster(
            {"node1": 8192, "node2": 8192, "node3": data.draw(st.sampled_from([1024, 6144]))},
            {f"i{k}": (homes[k], memories[k]) for k in range(n_inst)},
        )
    )
    deadline = data.draw(st.sampled_from([None, 0, 30, 100]), label="deadline")
    max_parallel = data.draw(st.integers(1, 3), label="max_parallel")
    check(world, world.drain("node1", deadline=deadline, max_parallel=max_parallel), {})
    if data.draw(st.booleans(), label="second drain"):
        check(world, world.drain("node2", max_parallel=2), {})
    for _ in range(data.draw(st.integers(0, 40), label="events")):
        action = data.draw(ACTIONS)
        unfinished = world.unfinished()
        if action in ("run", "finish", "fail") and unfinished:
            job = data.draw(st.sampled_from(unfinished))
            if action == "run":
                world.run(job)
            else:
                world.finish(job, error="no node has room: boom" if action == "fail" else None)
        elif action == "add_node":
            world.set_node(f"node{len(world.view.nodes) + 1}", mtotal=8192)
        elif action in ("stop", "remove") and world.view.instances:
            busy = {world.ops[j].get("instance_name") for j in unfinished}
            name = data.draw(st.sampled_from(sorted(world.view.instances)))
            if action == "stop":
                world.set_instance(name, admin_state="down")
            elif name not in busy:
                world.remove_instance(name)
        elif action == "advance":
            world.now += data.draw(st.sampled_from([10.0, 50.0]))
        elif action == "update":
            record = world.records["node/node1"]
            if record.status == "draining":
                world.drain("node1", deadline=None if record.deadline is None else 20,
                            max_parallel=data.draw(st.integers(1, 3)))  # fmt: skip
        elif action == "cancel":
            world.cancel("node1", keep_drained=data.draw(st.booleans()))
        crash = data.draw(st.sampled_from([None, None, None, 0, 1, 2]), label="crash after")
        if crash is not None:
            world.crash_step(crash)
        step(world)
