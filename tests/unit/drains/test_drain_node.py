"""The node drain core (docs/contracts.md#node-drain) on worked examples, through the simulated
World."""

from __future__ import annotations

import msgspec
import pytest
from drains_testlib import World, cluster

from client import errors
from luxid.drains import ChangePriority, Submit, drain_status, node
from luxid.drains.effects import CancelJob

# DrainStatus as docs/contracts.md#drain-methods lists it
DRAIN_STATUS_FIELDS = [
    "target",
    "status",
    "started_at",
    "updated_at",
    "deadline",
    "max_parallel",
    "mode",
    "message",
    "deadline_reached",
    "completed_at",
    "total",
    "remaining",
    "running",
    "blocked",
    "shut_down",
    "jobs",
    "start_at",
]


def three_nodes(*instances: str, memory: int = 1024) -> World:
    return World(
        cluster(
            {"node1": 8192, "node2": 8192, "node3": 8192},
            {name: ("node1", memory) for name in instances},
        )
    )


def submits(effects: list, kind: str | None = None) -> list[Submit]:
    return [e for e in effects if isinstance(e, Submit) and (kind is None or e.kind == kind)]


def test_the_first_job_marks_the_node_drained_at_the_most_urgent_priority():
    world = three_nodes("web1", "web2")
    effects = world.drain("node1", max_parallel=2)
    (first,) = submits(effects)
    op = first.ops[0]
    assert op["OP_ID"] == "OP_NODE_SET_PARAMS"
    assert (op["node_name"], op["drained"], op["priority"]) == ("node1", True, -20)
    assert world.unfinished() == [1]  # no move before the node is drained


def test_moves_follow_with_the_drain_bucket_and_priority():
    world = three_nodes("web1", "web2", "web3")
    world.drain("node1", max_parallel=2, priority=5)
    world.finish(1)
    effects = world.step()
    migrations = submits(effects, "migrate")
    assert [m.instance for m in migrations] == ["web1", "web2"]  # max_parallel 2
    op = migrations[0].ops[0]
    assert op["OP_ID"] == "OP_INSTANCE_MIGRATE" and op["priority"] == 5
    assert op["reason"][0][:2] == ["lw:drain", "rate-limit:2:drain-node1"]
    assert isinstance(op["reason"][0][2], int)  # ns, as every reason timestamp
    # the two moves go to different nodes: the first one's room is counted as taken
    assert {m.node for m in migrations} == {"node2", "node3"}
    assert "web1: migration job 2 submitted" in world.events("node1")


def test_complete_only_when_every_move_has_finished():
    world = three_nodes("web1", "web2")
    world.drain("node1", max_parallel=5)
    world.finish(1)
    world.step()
    world.run(2)
    world.step()
    assert "web1: migrating to node2" in world.events("node1")
    world.finish(2)
    world.step()
    assert world.records["node/node1"].status == "draining"  # web2 still moving
    world.finish(3)
    world.step()
    record = world.records["node/node1"]
    assert record.status == "complete" and record.completed_at == world.now
    assert not record.deadline_reached
    assert world.events("node1")[-1] == "all instances moved; drain complete"
    assert world.view.nodes["node1"].drained  # stays drained


def test_a_node_without_instances_completes_once_it_is_drained():
    world = three_nodes()
    world.drain("node1")
    world.finish(1)
    world.step()
    assert world.records["node/node1"].status == "complete"


def test_a_blocked_instance_says_why_and_resumes_when_a_node_is_added():
    world = World(cluster({"node1": 8192, "node2": 2048}, {"web3": ("node1", 4096)}))
    world.drain("node1")
    world.finish(1)
    assert world.step() == []
    record = world.records["node/node1"]
    reason = record.blocked["web3"].reason
    assert reason.startswith("no node has room for web3: it needs 4096 MiB")
    assert f"web3: blocked: {reason}" in world.events("node1")
    assert drain_status(record, world.view, world.jobs).blocked == [["web3", reason]]
    # nothing changed: no retry, no new event
    events = len(record.events)
    assert world.step() == []
    assert len(world.records["node/node1"].events) == events
    world.set_node("node4", mtotal=16384)
    (move,) = submits(world.step(), "migrate")
    assert (move.instance, move.node) == ("web3", "node4")
    world.finish(move_id := world.unfinished()[0])
    assert move_id == 2
    world.step()
    assert world.records["node/node1"].status == "complete"


def test_a_failed_move_is_retried_only_after_the_room_changed():
    world = three_nodes("web1")
    world.drain("node1")
    world.finish(1)
    world.step()
    world.finish(2, error="no node has room for web1: it needs 1024 MiB and 1 CPUs")
    assert world.step() == []  # not retried in a loop
    assert "web1: blocked: no node has room for web1" in world.events("node1")[-1]
    assert world.step() == []
    world.set_instance("web1", memory=512)  # something that changes the room
    (retry,) = submits(world.step(), "migrate")
    assert retry.instance == "web1"


def test_an_instance_stopped_elsewhere_unblocks_a_move():
    world = World(
        cluster({"node1": 8192, "node2": 4096}, {"web3": ("node1", 4096), "db": ("node2", 2048)})
    )
    world.drain("node1")
    world.finish(1)
    world.step()
    assert "web3" in world.records["node/node1"].blocked
    world.set_instance("db", admin_state="down")
    assert [m.instance for m in submits(world.step(), "migrate")] == ["web3"]


def test_deadline_cancels_queued_moves_fails_over_the_rest_and_shuts_down_what_cannot_go():
    world = World(
        cluster(
            {"node1": 16384, "node2": 6144},
            {"a": ("node1", 1024), "b": ("node1", 1024), "c": ("node1", 1024),
             "big": ("node1", 8192)},
        )
    )  # fmt: skip
    world.drain("node1", deadline=60, max_parallel=2)
    world.finish(1)
    world.step()
    running, queued = world.unfinished()
    world.run(running)
    world.now += 60
    effects = world.step()
    assert CancelJob(target="node/node1", job_id=queued) in effects
    assert world.records["node/node1"].deadline_reached
    failovers = submits(effects, "failover")
    shutdowns = submits(effects, "shutdown")
    # the running migration is left alone; every other instance gets one action
    moving = world.ops[running]["instance_name"]
    handled = [*(f.instance for f in failovers), *(s.instance for s in shutdowns), moving]
    assert sorted(handled) == ["a", "b", "big", "c"]
    assert [s.instance for s in shutdowns] == ["big"]
    assert all("rate-limit" not in f.ops[0]["reason"][0][1] for f in failovers)
    world.finish_all()
    world.step()
    record = world.records["node/node1"]
    assert record.status == "complete" and record.deadline_reached
    assert record.shut_down == ("big",)
    assert world.events("node1")[-1] == (
        f"deadline reached: {len(failovers)} instances failed over, 1 shut down"
    )
    status = drain_status(record, world.view, world.jobs)
    assert list(msgspec.to_builtins(status)) == DRAIN_STATUS_FIELDS
    assert status.remaining == 1 and status.shut_down == ["big"] and status.total == 4


def test_a_deadline_of_zero_forces_at_once():
    world = three_nodes("web1", "web2")
    world.drain("node1", deadline=0, max_parallel=1)
    world.finish(1)
    effects = world.step()
    assert sorted(f.instance for f in submits(effects, "failover")) == ["web1", "web2"]
    assert not submits(effects, "migrate")


def test_update_keeps_started_at_and_reprioritises_queued_moves():
    world = three_nodes("web1", "web2")
    world.drain("node1", max_parallel=1, deadline=3600)
    world.finish(1)
    world.step()
    started = world.records["node/node1"].started_at
    world.now += 10
    effects = world.drain("node1", max_parallel=2, priority=-5, deadline=60, message="hw")
    record = world.records["node/node1"]
    assert record.started_at == started
    assert (record.max_parallel, record.priority, record.message) == (2, -5, "hw")
    assert record.deadline == world.now + 60
    assert ChangePriority(target="node/node1", job_id=2, priority=-5) in effects
    assert len(submits(effects, "migrate")) == 1  # the second slot is used at once
    assert world.events("node1")[-2].startswith("drain strategy set (deadline ")
    assert world.events("node1")[-2].endswith(", max_parallel 2)")


@pytest.mark.parametrize("keep", [False, True])
def test_cancel_cancels_queued_moves_and_undrains_unless_kept(keep):
    world = three_nodes("web1", "web2")
    world.drain("node1", max_parallel=2)
    world.finish(1)
    world.step()
    world.run(2)
    effects = world.cancel("node1", keep_drained=keep)
    assert [e.job_id for e in effects if isinstance(e, CancelJob)] == [3]  # 2 runs on
    undrain = submits(effects, "undrained")
    assert bool(undrain) is not keep
    if undrain:
        assert undrain[0].ops[0]["drained"] is False
        assert undrain[0].ops[0]["priority"] == -20
    record = world.records["node/node1"]
    assert record.status == "canceled" and "drain canceled" in world.events("node1")
    world.finish_all()
    assert world.step() == []
    assert world.view.nodes["node1"].drained is keep


def test_a_node_being_drained_is_not_a_target_of_another_drain():
    world = World(
        cluster(
            {"node1": 8192, "node2": 65536, "node3": 8192},
            {"web1": ("node1", 1024), "web2": ("node2", 1024)},
        )
    )
    world.drain("node2")
    world.drain("node1")  # node2 has the most room, but is being drained
    world.finish_all("OP_NODE_SET_PARAMS")
    effects = world.step()
    targets = {m.instance: m.node for m in submits(effects, "migrate")}
    assert targets == {"web1": "node3", "web2": "node3"}


def test_errors_name_what_is_wrong():
    world = three_nodes("web1")
    with pytest.raises(errors.NotFound, match="nodeX"):
        world.drain("nodeX")
    with pytest.raises(errors.InvalidParams, match="max_parallel") as exc:
        world.drain("node1", max_parallel=0)
    assert exc.value.data["param"] == "max_parallel"
    with pytest.raises(errors.InvalidParams, match="deadline"):
        world.drain("node1", deadline=-1)


def test_after_a_restart_jobs_submitted_but_not_recorded_are_found_again():
    world = three_nodes("web1", "web2")
    world.drain("node1")
    world.finish(1)
    before = world.records["node/node1"]
    (move,) = submits(world.step(), "migrate")
    # luxid died after the submit, before the record was written: the job carries its tag
    tag = next(r[1] for r in move.ops[0]["reason"] if r[0] == "lw:drain-job")
    adopted = node.adopt_jobs(before, {2: tag}, world.now)
    assert [(j.id, j.kind, j.instance, j.node) for j in adopted.active][-1] == (
        2, "migrate", "web1", move.node
    )  # fmt: skip
    world.records["node/node1"] = adopted
    assert world.step() == []  # web1 is not moved twice; max_parallel 1 is full
    assert node.adopt_jobs(adopted, {2: tag, 7: "node/other migrate x -"}, world.now) is adopted


def test_events_keep_the_last_thousand_with_increasing_serials():
    world = three_nodes(*(f"i{n:04d}" for n in range(600)), memory=1)
    world.view = msgspec.structs.replace(world.view, vcpu_ratio=10.0)  # room for 600 CPUs
    world.drain("node1", max_parallel=50)
    for _ in range(20):
        world.finish_all()
        world.step()
    assert world.records["node/node1"].status == "complete"
    events = world.records["node/node1"].events
    assert len(events) == 1000
    serials = [serial for serial, _, _ in events]
    assert serials == list(range(serials[0], serials[0] + 1000)) and serials[0] > 1
