"""The examples of the seed design ("Filtering of jobs for the Ganeti job queue", Ganeti's design-optables),
exactly as written there, checked as properties over random queues."""

from __future__ import annotations

from collections import Counter
from typing import Any

from filters_testlib import select, uid, verdicts
from hypothesis import given, settings
from hypothesis import strategies as st

from luxid.filters import FilterChain, FilterJob, FilterRule, Verdict, make_rule

SETTINGS = settings(max_examples=40, deadline=None)
WATERMARK = 50
OP_IDS = ["OP_TEST_DELAY", "OP_INSTANCE_CREATE", "OP_INSTANCE_REPLACE_DISKS", "OP_NODE_ADD"]
REASONS = [
    "maintenance pink bunny",
    "the maintenance pink bunny, part 2",
    "routine",
    "rate-limit:7:operation pink bunny",
]


def add(n: int, spec: dict[str, Any]) -> FilterRule:
    """A rule from the seed's JSON, through the add-time validation."""
    return make_rule(
        uid(n), spec["priority"], spec["predicates"], spec["action"], [], watermark=WATERMARK
    )


def make_job(job_id: int, op_ids: list[str], reasons: list[str]) -> FilterJob:
    ops = [
        {
            "OP_ID": op_id,
            "instance_name": f"i{job_id}",
            "reason": [["gnt:client", text, 1] for text in reasons]
            + [[f"lw:opcode:{op_id.lower()}", f"job={job_id};index={i}", 2]],
        }
        for i, op_id in enumerate(op_ids)
    ]
    return FilterJob(job_id, ops)


job_st = st.builds(
    make_job,
    st.integers(1, 100),
    st.lists(st.sampled_from(OP_IDS), min_size=1, max_size=3),
    st.lists(st.sampled_from(REASONS), max_size=2),
)
queue_st = st.lists(job_st, max_size=25, unique_by=lambda j: j.id).map(
    lambda js: sorted(js, key=lambda j: j.id)
)

DRAIN = {
    "priority": 0,
    "predicates": [["jobid", [">", "id", "watermark"]]],
    "action": "REJECT",
}
SOFT_DRAIN = {**DRAIN, "action": "PAUSE"}
MAINTENANCE = [
    {
        "priority": 0,
        "predicates": [["reason", ["=~", "reason", "maintenance pink bunny"]]],
        "action": "ACCEPT",
    },
    {"priority": 1, "predicates": [["jobid", [">", "id", "watermark"]]], "action": "PAUSE"},
]
NO_CREATIONS = {
    "priority": 1,
    "predicates": [["opcode", ["=", "OP_ID", "OP_INSTANCE_CREATE"]]],
    "action": "REJECT",
}
THROTTLE = {
    "priority": 99,
    "predicates": [["opcode", ["=", "OP_ID", "OP_INSTANCE_REPLACE_DISKS"]]],
    "action": ["RATE_LIMIT", 10],
}


@SETTINGS
@given(queue_st)
def test_drain_rejects_exactly_the_new_jobs(jobs: list[FilterJob]) -> None:
    chain = FilterChain([add(1, DRAIN)])
    for j in jobs:
        expected = Verdict("REJECT", uid(1)) if j.id > WATERMARK else None
        assert chain.verdict(j) == expected
    plain = [j for j in jobs if not j.buckets]
    assert select(chain, plain, max_running=1000) == [j.id for j in plain if j.id <= WATERMARK]


@SETTINGS
@given(queue_st)
def test_soft_drain_pauses_exactly_the_new_jobs(jobs: list[FilterJob]) -> None:
    chain = FilterChain([add(1, SOFT_DRAIN)])
    for j in jobs:
        assert chain.verdict(j) == (Verdict("PAUSE", uid(1)) if j.id > WATERMARK else None)
    # paused jobs stay queued; removing the rule lets them run (bucket limits aside)
    plain = [j for j in jobs if not j.buckets]
    assert select(chain, plain, max_running=1000) == [j.id for j in plain if j.id <= WATERMARK]
    assert select(FilterChain(), plain, max_running=1000) == [j.id for j in plain]


@SETTINGS
@given(queue_st)
def test_maintenance_exception(jobs: list[FilterJob]) -> None:
    chain = FilterChain([add(1, MAINTENANCE[0]), add(2, MAINTENANCE[1])])
    for j in jobs:
        bunny = any("maintenance pink bunny" in t for t in j.reason_texts)  # searched
        v = chain.verdict(j)
        if bunny:
            assert v == Verdict("ACCEPT", uid(1))
        elif j.id > WATERMARK:
            assert v == Verdict("PAUSE", uid(2))
        else:
            assert v is None


@SETTINGS
@given(queue_st)
def test_cancel_instance_creations(jobs: list[FilterJob]) -> None:
    chain = FilterChain([add(1, NO_CREATIONS)])
    for j in jobs:
        creates = "OP_INSTANCE_CREATE" in {op["OP_ID"] for op in j.ops}  # any opcode
        assert chain.verdict(j) == (Verdict("REJECT", uid(1)) if creates else None)


@SETTINGS
@given(st.lists(queue_st, min_size=1, max_size=4))
def test_throttle_disk_replacements_to_ten(queues: list[list[FilterJob]]) -> None:
    """Whatever runs already and whatever is queued, never more than 10 replace-disks."""
    chain = FilterChain([add(1, THROTTLE)])
    running: list[FilterJob] = []
    for queue in queues:
        queue = [j for j in queue if j.id not in {r.id for r in running}]
        started = set(select(chain, queue, running, max_running=1000))
        running += [j for j in queue if j.id in started]
        throttled = [v for v in verdicts(chain, running) if v == Verdict("RATE_LIMIT", uid(1), 10)]
        assert len(throttled) <= 10
        # every other job started (a reason-trail bucket may still hold it back)
        for j in queue:
            if chain.verdict(j) is None and not j.buckets:
                assert j.id in started
        running = running[len(running) // 2 :]  # some finish


@SETTINGS
@given(st.lists(queue_st, min_size=1, max_size=4))
def test_ad_hoc_rate_limit_seven(queues: list[list[FilterJob]]) -> None:
    """`--reason='rate-limit:7:operation pink bunny'`: at most 7 such jobs run at once."""
    chain = FilterChain()
    running: list[FilterJob] = []
    for queue in queues:
        queue = [j for j in queue if j.id not in {r.id for r in running}]
        started = set(select(chain, queue, running, max_running=1000))
        running += [j for j in queue if j.id in started]
        per_bucket = Counter(b for j in running for b in j.buckets)
        assert set(per_bucket) <= {"7:operation pink bunny"}
        assert per_bucket["7:operation pink bunny"] <= 7
        for j in queue:
            if not j.buckets:
                assert j.id in started
        running = running[::2]


def test_all_seed_rules_together() -> None:
    """The seed's rules in one chain: the maintenance ACCEPT (priority 0) wins over the
    drain-like PAUSE (priority 1) and the creation REJECT (priority 1, later uuid)."""
    chain = FilterChain(
        [add(1, MAINTENANCE[0]), add(2, MAINTENANCE[1]), add(3, NO_CREATIONS), add(4, THROTTLE)]
    )
    bunny_create = make_job(60, ["OP_INSTANCE_CREATE"], ["maintenance pink bunny"])
    old_create = make_job(10, ["OP_INSTANCE_CREATE"], [])
    new_replace = make_job(61, ["OP_INSTANCE_REPLACE_DISKS"], [])
    old_replace = make_job(11, ["OP_INSTANCE_REPLACE_DISKS"], [])
    assert chain.verdict(bunny_create) == Verdict("ACCEPT", uid(1))
    assert chain.verdict(old_create) == Verdict("REJECT", uid(3))
    assert chain.verdict(new_replace) == Verdict("PAUSE", uid(2))
    assert chain.verdict(old_replace) == Verdict("RATE_LIMIT", uid(4), 10)


def test_throttle_fills_exactly_ten_slots() -> None:
    chain = FilterChain([add(1, THROTTLE)])
    jobs = [make_job(i, ["OP_INSTANCE_REPLACE_DISKS"], []) for i in range(1, 31)]
    assert select(chain, jobs, max_running=1000) == list(range(1, 11))
    assert select(chain, jobs[10:], jobs[:9], max_running=1000) == [11]
