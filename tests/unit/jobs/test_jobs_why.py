"""Property tests of the why_job chain builder (luxid.jobs.why,
docs/contracts.md#why-a-job-waits) over random situations: jobs that are queued with a
random hold (a dependency on any job, a rule, a bucket, the slots) or hold a slot and wait
for locks held by random jobs and clients, cycles included.

Checked: at most 8 Steps, exactly 8 when the walk goes on longer; every lock Step names
the real holders of a real lock wait; a cycle Step comes last, closes on the job it
repeats, and no job is passed twice before it; the first Step is what the hold or the
lock wait says; without lock waits the builder asks for them exactly when it needs them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.api.wconfd import LockHolder, LockWait
from client.api.why import CycleStep, DependencyStep, LockStep, WhyJob
from luxid.filters.verdict import Hold, Verdict
from luxid.jobs import Job, new_job
from luxid.jobs.why import MAX_LINKS, LocksNeeded, QueueDrainRule, Situation, why_job

NOW = 1_000_000.0
DRAIN_UUID = "drain-rule"


def queued_job(job_id: int) -> Job:
    return new_job(job_id, [{"OP_ID": "OP_TEST_DELAY", "duration": 1}], NOW - 30)


def waiting_job(job_id: int) -> Job:
    job = queued_job(job_id)
    op = msgspec.structs.replace(job.ops[0], status="waiting", start_ts=NOW - 12)
    return msgspec.structs.replace(job, ops=(op,), start_ts=NOW - 20, process_id=100 + job_id)


@dataclass
class World:
    """A random situation as plain data."""

    jobs: dict[int, Job]
    holds: dict[int, Hold]
    slotted: list[int]
    waits: list[LockWait]
    max_running: int = 2

    def situation(self, with_waits: bool = True) -> Situation:
        running = [self.jobs[i] for i in self.slotted]
        return Situation(
            now=NOW,
            job=self.jobs.get,
            hold_of=lambda job: self.holds.get(job.id),
            running=running,
            max_running_jobs=self.max_running,
            verdict_of=lambda job: Verdict("RATE_LIMIT", "rl", 1) if job.id % 2 else None,
            buckets_of=lambda job: frozenset({"1:x"}) if job.id % 3 == 0 else frozenset(),
            queue_drain=QueueDrainRule(DRAIN_UUID, "soft"),
            lock_waits=self.waits if with_waits else None,
        )


def holds_for(ids: list[int]) -> st.SearchStrategy[Hold | None]:
    return st.one_of(
        st.none(),
        st.sampled_from(ids).map(lambda i: Hold("dependency", f"waiting for job {i}", job_id=i)),
        st.sampled_from(["u1", DRAIN_UUID]).map(lambda u: Hold("paused", f"paused by {u}", key=u)),
        st.just(Hold("bucket", "rate-limit bucket 1:x full", key="1:x")),
        st.just(Hold("rate_limit", "rate-limited by filter rl", key="rl")),
        st.just(Hold("slots", "max running jobs reached")),
    )


def holder(owner_or_job: int | str) -> LockHolder:
    if isinstance(owner_or_job, int):
        return LockHolder(f"job-{owner_or_job}:1:1.00", owner_or_job, "exclusive", NOW - 5)
    return LockHolder(owner_or_job, None, "shared", NOW - 7)


@st.composite
def worlds(draw: Any) -> World:
    n = draw(st.integers(1, 14))
    ids = list(range(1, n + 1))
    slotted = sorted(draw(st.sets(st.sampled_from(ids))))
    jobs = {i: waiting_job(i) if i in slotted else queued_job(i) for i in ids}
    holds = {i: h for i in ids if i not in slotted and (h := draw(holds_for(ids))) is not None}
    owners = [f"job-{i}:1:1.00" for i in slotted] + ["cli-a:1:1.00", "cli-b:1:1.00"]
    waits = []
    for owner in draw(st.lists(st.sampled_from(owners), unique=True)):
        job_id = int(owner[4:].split(":")[0]) if owner.startswith("job-") else None
        for lock in draw(st.lists(st.sampled_from(["node/n1", "node/n2", "instance/i1"]),
                                  min_size=1, max_size=2, unique=True)):  # fmt: skip
            by = draw(st.lists(st.sampled_from([*ids, "cli-a:1:1.00", "cli-b:1:1.00"]),
                               min_size=1, max_size=3, unique=True))  # fmt: skip
            held_by = [holder(b) for b in by if b != job_id and b != owner]
            if held_by:
                waits.append(LockWait(owner, job_id, lock, "exclusive", NOW - 3, held_by))
    return World(jobs, holds, slotted, waits)


def check_chain(world: World, answer: WhyJob) -> None:
    chain = answer.chain
    assert len(chain) <= MAX_LINKS
    real = {(w.lock, tuple(w.held_by)) for w in world.waits}
    for step in chain:
        assert step.text and "\n" not in step.text
        if isinstance(step, LockStep):
            assert (step.lock, tuple(step.held_by)) in real
            assert step.held_by
        if isinstance(step, DependencyStep):
            assert step.job_id in world.jobs
    cycles = [i for i, step in enumerate(chain) if isinstance(step, CycleStep)]
    assert cycles in ([], [len(chain) - 1])
    if cycles:
        step = chain[-1]
        assert isinstance(step, CycleStep)
        assert step.job_ids[0] == step.job_ids[-1]
        assert len(set(step.job_ids)) == len(step.job_ids) - 1


@settings(max_examples=400, deadline=None)
@given(worlds(), st.data())
def test_chains_are_short_real_and_end_at_a_cycle_if_any(world: World, data: Any) -> None:
    job_id = data.draw(st.sampled_from(sorted(world.jobs)))
    answer = why_job(world.jobs[job_id], world.situation())
    check_chain(world, answer)
    assert answer.job_id == job_id
    # Asked without lock waits: the same chain, or a request for them when it needs them.
    try:
        assert why_job(world.jobs[job_id], world.situation(with_waits=False)) == answer
        needed = False
    except LocksNeeded:
        needed = True
    assert needed == _reaches_a_slot(world, job_id, answer)


def _reaches_a_slot(world: World, job_id: int, answer: WhyJob) -> bool:
    """Whether the walk comes to a job holding a slot (whose locks it must look up): the
    job itself, or one a dependency Step names with room left in the chain."""
    chain = answer.chain
    return job_id in world.slotted or any(
        isinstance(step, DependencyStep) and step.job_id in world.slotted and i < MAX_LINKS - 1
        for i, step in enumerate(chain)
    )


@settings(max_examples=200, deadline=None)
@given(worlds(), st.data())
def test_the_first_step_is_what_holds_the_job(world: World, data: Any) -> None:
    job_id = data.draw(st.sampled_from(sorted(world.jobs)))
    chain = why_job(world.jobs[job_id], world.situation()).chain
    if job_id in world.slotted:
        mine = [w for w in world.waits if w.job_id == job_id]
        if not mine:
            assert chain == []
        else:
            assert isinstance(chain[0], LockStep) and chain[0].lock == mine[0].lock
        return
    hold = world.holds.get(job_id)
    if hold is None:
        assert chain == []
        return
    expected = {
        "dependency": "dependency",
        "paused": "drain_flag" if hold.key == DRAIN_UUID else "filter",
        "bucket": "rate_limit",
        "rate_limit": "rate_limit",
        "slots": "slots",
    }[hold.kind]
    assert msgspec.to_builtins(chain[0])["kind"] == expected


@pytest.mark.parametrize("length", [1, 5, 8, 9, 20])
def test_a_long_dependency_chain_is_cut_at_exactly_eight(length: int) -> None:
    # Job i+1 depends on job i; job 1 waits for the slots.
    ids = list(range(1, length + 1))
    holds = {i: Hold("dependency", f"waiting for job {i - 1}", job_id=i - 1) for i in ids[1:]}
    holds[1] = Hold("slots", "max running jobs reached")
    world = World({i: queued_job(i) for i in ids}, holds, [], [])
    chain = why_job(world.jobs[length], world.situation()).chain
    assert len(chain) == min(length, MAX_LINKS)
    kinds = [msgspec.to_builtins(step)["kind"] for step in chain]
    assert kinds == (["dependency"] * (length - 1) + ["slots"])[:MAX_LINKS]


def test_a_lock_cycle_between_two_jobs_is_marked() -> None:
    a, b = waiting_job(1), waiting_job(2)
    waits = [
        LockWait("job-1:1:1.00", 1, "node/n1", "exclusive", NOW, [holder(2)]),
        LockWait("job-2:1:1.00", 2, "node/n2", "exclusive", NOW, [holder(1)]),
    ]
    world = World({1: a, 2: b}, {}, [1, 2], waits)
    answer = msgspec.to_builtins(why_job(a, world.situation()))
    assert answer["status"] == "waiting"
    assert [s["kind"] for s in answer["chain"]] == ["lock", "lock", "cycle"]
    assert answer["chain"][0]["text"] == (
        "job 2 (waiting OP_TEST_DELAY 1.0 for 12 s) holds node/n1 exclusive"
    )
    assert answer["chain"][2] == {
        "kind": "cycle", "text": "wait-for cycle: job 1 -> job 2 -> job 1", "job_ids": [1, 2, 1],
    }  # fmt: skip


def test_a_client_holder_that_waits_itself_continues_the_chain() -> None:
    a, b = waiting_job(1), waiting_job(2)
    waits = [
        LockWait("job-1:1:1.00", 1, "node/n1", "exclusive", NOW, [holder("cli-a:1:1.00")]),
        LockWait("cli-a:1:1.00", None, "node/n2", "exclusive", NOW, [holder(2)]),
    ]
    world = World({1: a, 2: b}, {}, [1, 2], waits)
    chain = why_job(a, world.situation()).chain
    assert [s.text for s in chain] == [
        "client cli-a:1:1.00 holds node/n1 shared (for 7 s)",
        "job 2 (waiting OP_TEST_DELAY 1.0 for 12 s) holds node/n2 exclusive",
    ]


def test_a_finished_job_has_an_empty_chain() -> None:
    job = queued_job(1)
    done = replace(World({1: job}, {}, [], []))
    op = msgspec.structs.replace(job.ops[0], status="success")
    finished = msgspec.structs.replace(job, ops=(op,))
    assert why_job(finished, done.situation()) == WhyJob(1, "success", [])
