"""The budget rule (luxid.budgets) with the scheduler's selection step: random budgets over
random instances, with concurrent drains' moves and manual jobs arriving and ending in
random order.  Invariants (docs/contracts.md#disruption-budgets):

- without an override, no pass ever leaves a budget with more disrupted members than it
  allows (or than were down anyway);
- a job is held by a budget only when starting it would exceed that budget, and its
  pending_reason is that budget's exact text;
- a job with an override always starts (slots allowing), and each budget it exceeds gets
  the event.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from client.budgets import BudgetRecord
from luxid.budgets import BudgetCount, InstanceFacts, budget_reason, build_book
from luxid.jobs import Job, mark_opcode_running, new_job, select_jobs, start_job

INSTANCES = [f"i{n}" for n in range(8)]
TAGS = ["a", "b", "c"]
OPS = ["OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER", "OP_INSTANCE_SHUTDOWN",
       "OP_INSTANCE_REMOVE", "OP_INSTANCE_REPLACE_DISKS", "OP_INSTANCE_STARTUP"]  # fmt: skip


def make_job(job_id: int, instance: str, op_id: str, override: str | None) -> Job:
    op: dict[str, Any] = {"OP_ID": op_id, "instance_name": instance, "reason": []}
    if override == "ignore_budgets":
        op["ignore_budgets"] = True
    elif override == "deadline":
        op["reason"] = [["lw:drain", "deadline:drain-n1", 1]]
    else:
        op["reason"] = [["lw:drain", "rate-limit:1:drain-n1", 1]]
    return new_job(job_id, [op], now=float(job_id))


def started(job: Job) -> Job:
    return mark_opcode_running(start_job(job, 1.0, pid=job.id, pid_start=1.0), 0, 2.0)


budgets_st = st.lists(
    st.builds(
        lambda name, tags, top: BudgetRecord(name=name, tags=tuple(tags), max_disrupted=top),
        st.sampled_from(["b1", "b2", "b3"]),
        st.lists(st.sampled_from(TAGS), min_size=1, max_size=2, unique=True),
        st.integers(0, 3),
    ),
    min_size=1,
    max_size=3,
    unique_by=lambda b: b.name,
)
instances_st = st.lists(
    st.tuples(st.lists(st.sampled_from(TAGS), max_size=2, unique=True), st.booleans()),
    min_size=len(INSTANCES),
    max_size=len(INSTANCES),
).map(
    lambda facts: [
        InstanceFacts(n, tuple(t), up) for n, (t, up) in zip(INSTANCES, facts, strict=True)
    ]
)
# An event: submit (instance, op, override) or end the n-th running job.
events_st = st.lists(
    st.one_of(
        st.tuples(
            st.just("submit"),
            st.sampled_from(INSTANCES),
            st.sampled_from(OPS),
            st.sampled_from([None, None, None, "ignore_budgets", "deadline"]),
        ),
        st.tuples(st.just("end"), st.integers(0, 10)),
    ),
    max_size=30,
)


def disrupted(book: Any, running: list[Job]) -> dict[str, set[str]]:
    """The reference count, computed without luxid.budgets.rule."""
    out = {name: set(book.down[name]) for name in book.budgets}
    for job in running:
        op = job.ops[0].input
        if op["OP_ID"] == "OP_INSTANCE_STARTUP":
            continue
        for name in book.of_instance.get(op["instance_name"], ()):
            out[name].add(op["instance_name"])
    return out


@settings(max_examples=300, deadline=None)
@given(budgets_st, instances_st, events_st, st.integers(1, 6))
def test_no_pass_exceeds_a_budget_without_an_override(budgets, instances, events, slots):
    book = build_book(budgets, instances)
    queued: list[Job] = []
    running: list[Job] = []
    next_id = 1
    for event in events:
        if event[0] == "submit":
            _, instance, op_id, override = event
            queued.append(make_job(next_id, instance, op_id, override))
            next_id += 1
        elif running:
            running.pop(event[1] % len(running))
        before = disrupted(book, running)
        count = BudgetCount(book, running)
        sel = select_jobs(
            queued, running, slots, lambda j: None, lambda j: (), lambda i: None, count
        )
        by_id = {j.id: j for j in queued}
        starting = [by_id[i] for i in sel.start]
        # Holds are exact: the reason of the first budget the job would exceed.
        for job_id, reason in sel.pending.items():
            if reason is None or not reason.startswith("budget "):
                continue
            job = by_id[job_id]
            assert sel.start == [] or job_id not in sel.start
            op = job.ops[0].input
            name = reason.split(":")[0].removeprefix("budget ")
            assert op["instance_name"] in book.members[name]
        running = running + [started(j) for j in starting]
        queued = [j for j in queued if j.id not in set(sel.start)]
        after = disrupted(book, running)
        overridden = any(
            j.ops[0].input.get("ignore_budgets")
            or j.ops[0].input["reason"][0][1].startswith("deadline")
            for j in running
        )
        for name, budget in book.budgets.items():
            if not overridden:
                assert len(after[name]) <= max(budget.max_disrupted, len(before[name]))
        # An override always starts while slots are free.
        exceeded_jobs = {job_id for _, job_id, _ in sel.exceeded}
        assert exceeded_jobs <= set(sel.start)


@settings(max_examples=200, deadline=None)
@given(budgets_st, instances_st, st.sampled_from(INSTANCES), st.sampled_from(OPS[:5]))
def test_a_held_job_would_exceed_and_a_free_one_would_not(budgets, instances, target, op_id):
    book = build_book(budgets, instances)
    running = [started(make_job(100 + n, inst, "OP_INSTANCE_MIGRATE", None))
               for n, inst in enumerate(INSTANCES[:3]) if inst != target]  # fmt: skip
    count = BudgetCount(book, running)
    job = make_job(1, target, op_id, None)
    held = count.hold(job)
    reference = disrupted(book, running)
    over = sorted(
        name
        for name in book.of_instance.get(target, ())
        if target not in reference[name]
        and len(reference[name]) + 1 > book.budgets[name].max_disrupted
    )
    if not over:
        assert held is None
        return
    assert held is not None and held.kind == "budget" and held.key == over[0]
    members = sorted(reference[over[0]])
    why = {m: "down" for m in members}
    for r in running:
        inst = r.ops[0].input["instance_name"]
        if inst in why:
            why[inst] = f"job {r.id} OP_INSTANCE_MIGRATE"
    expected = budget_reason(
        over[0], book.budgets[over[0]].max_disrupted, [(m, why[m]) for m in members]
    )
    assert held.reason == expected


def test_an_override_starts_past_the_budget_and_says_so():
    book = build_book(
        [BudgetRecord(name="web", tags=("web",), max_disrupted=1)],
        [InstanceFacts(f"web{n}", ("web",), True) for n in (1, 2, 3)],
    )
    first = started(make_job(41, "web2", "OP_INSTANCE_MIGRATE", None))
    count = BudgetCount(book, [first])
    forced = make_job(57, "web1", "OP_INSTANCE_FAILOVER", "deadline")
    sel = select_jobs([forced], [first], 5, lambda j: None, lambda j: (), lambda i: None, count)
    assert sel.start == [57]
    assert sel.exceeded == [("web", 57, "budget web exceeded by job 57 (deadline)")]
    # A job on a member disrupted already adds nothing: it is not held; one on another is.
    assert count.hold(make_job(58, "web1", "OP_INSTANCE_MIGRATE", None)) is None
    assert count.hold(make_job(59, "web3", "OP_INSTANCE_MIGRATE", None)) is not None
    assert count.reason("web") == (
        "budget web: 2 of 1 disrupted (web1: job 57 OP_INSTANCE_FAILOVER, "
        "web2: job 41 OP_INSTANCE_MIGRATE)"
    )
