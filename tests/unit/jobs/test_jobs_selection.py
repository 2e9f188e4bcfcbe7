"""Scheduler selection: order, slots, filters, buckets, dependencies, properties, speed."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from luxid.filters.verdict import Verdict
from luxid.jobs import (
    REASON_MAX_RUNNING,
    Job,
    fill_free_slots,
    mark_opcode_running,
    new_job,
    pause_job,
    queue_order,
    reason_buckets,
    select_jobs,
    start_job,
)

NO_BUCKETS: Callable[[Job], frozenset[str]] = lambda job: frozenset()  # noqa: E731
NO_VERDICT: Callable[[Job], Verdict | None] = lambda job: None  # noqa: E731


def job(job_id: int, priority: int = 0, reason: str | None = None, **op: Any) -> Job:
    params: dict[str, Any] = {
        "OP_ID": "OP_CLUSTER_RENAME",
        "name": "cluster1",
        "priority": priority,
    }
    params["reason"] = [["source1", "reason1", 1234]]
    if reason is not None:
        params["reason"].append(["cli", reason, 1])
    params.update(op)
    return new_job(job_id, [params], now=float(job_id))


def running(job_id: int, **kw: Any) -> Job:
    return mark_opcode_running(start_job(job(job_id, **kw), 1.0, pid=job_id, pid_start=1.0), 0, 2.0)


def statuses_of(*jobs: Job) -> Callable[[int], str | None]:
    from luxid.jobs import job_status

    table = {j.id: job_status(j) for j in jobs}
    return table.get


@dataclass
class Rule:
    """A fake filter rule: the real evaluator lives in luxid/filters; this mirrors the filter
    predicates."""

    uuid: str
    priority: int
    predicate: Callable[[Job], bool]
    action: str
    n: int = 0
    watermark: int = 1


def chain(*rules: Rule) -> Callable[[Job], Verdict | None]:
    ordered = sorted(rules, key=lambda r: (r.priority, r.watermark, r.uuid))

    def verdict_of(j: Job) -> Verdict | None:
        for rule in ordered:
            if rule.predicate(j) and rule.action != "CONTINUE":
                return Verdict(rule.action, rule.uuid, rule.n)  # type: ignore[arg-type]
        return None

    return verdict_of


def run(
    queued: list[Job],
    verdict_of: Callable[[Job], Verdict | None] = NO_VERDICT,
    running_jobs: list[Job] | None = None,
    max_running: int = 20,
    buckets_of: Callable[[Job], frozenset[str]] = reason_buckets,
) -> Any:
    running_jobs = running_jobs or []
    return select_jobs(
        queued,
        running_jobs,
        max_running,
        verdict_of,
        buckets_of,
        statuses_of(*queued, *running_jobs),
    )


ALWAYS: Callable[[Job], bool] = lambda j: True  # noqa: E731


def is_1(j: Job) -> bool:
    return j.id == 1


def above_watermark(j: Job) -> bool:
    return j.id > 1


# --------------------------------------------------------------- ordering, slots


def test_priority_then_id_order_up_to_max_running() -> None:
    queued = [job(1, 0), job(2, -10), job(3, 10), job(4, -10), job(5, 0)]
    sel = run(queued, max_running=3)
    assert sel.start == [2, 4, 1]
    assert sel.pending == {2: None, 4: None, 1: None, 5: REASON_MAX_RUNNING, 3: REASON_MAX_RUNNING}


def test_running_jobs_take_slots() -> None:
    sel = run([job(3), job(4)], running_jobs=[running(1), running(2)], max_running=3)
    assert sel.start == [3]
    assert sel.pending[4] == REASON_MAX_RUNNING
    sel = run([job(3)], running_jobs=[running(1), running(2)], max_running=2)
    assert sel.start == []


def test_finalized_jobs_in_the_queue_are_ignored() -> None:
    from luxid.jobs import finish_opcode

    done = finish_opcode(running(1), 0, 3.0, True)
    sel = run([done, job(2)])
    assert sel.start == [2]
    assert sel.finalized == [1] and 1 not in sel.pending  # reported, so the scheduler drops it


# ---------------------------------------------------------- vectors 14-21 (filters)


def test_vector_14_reject() -> None:
    sel = run([job(1)], chain(Rule("u1", 0, is_1, "REJECT")))
    assert sel.start == [] and sel.cancel == [(1, "rejected by filter u1")]


def test_vector_15_16_first_rule_wins() -> None:
    rules = [Rule("a", 0, is_1, "REJECT"), Rule("b", 1, is_1, "ACCEPT")]
    assert run([job(1)], chain(*rules)).start == []
    rules = [Rule("a", 0, is_1, "ACCEPT"), Rule("b", 1, is_1, "REJECT")]
    assert run([job(1)], chain(*rules)).start == [1]


def test_vector_17_pause() -> None:
    sel = run([job(1)], chain(Rule("u1", 0, is_1, "PAUSE")))
    assert sel.start == [] and sel.pending == {1: "paused by filter u1"} and sel.cancel == []


def test_vector_18_19_reject_by_watermark_and_all() -> None:
    sel = run([job(1), job(2)], chain(Rule("u", 0, above_watermark, "REJECT")))
    assert sel.start == [1] and sel.cancel == [(2, "rejected by filter u")]
    sel = run([job(1), job(2)], chain(Rule("u", 0, ALWAYS, "REJECT")))
    assert sel.start == [] and [c[0] for c in sel.cancel] == [1, 2]


def test_vector_20_21_rate_limit_behind_continue() -> None:
    rules = [Rule("c", 0, ALWAYS, "CONTINUE"), Rule("r", 1, ALWAYS, "RATE_LIMIT", 2)]
    sel = run([job(1), job(2), job(3)], chain(*rules))
    assert sel.start == [1, 2] and sel.pending[3] == "rate-limited by filter r"
    rules = [
        Rule("c", 0, above_watermark, "CONTINUE"),
        Rule("r", 1, above_watermark, "RATE_LIMIT", 2),
    ]
    assert run([job(i) for i in range(1, 5)], chain(*rules)).start == [1, 2, 3]


def test_rate_limit_counts_running_jobs_of_the_same_rule_only() -> None:
    verdict = chain(Rule("r", 0, lambda j: j.id % 2 == 0, "RATE_LIMIT", 2))
    sel = run([job(4), job(6), job(7)], verdict, running_jobs=[running(2), running(3)])
    assert sel.start == [4, 7]
    assert sel.pending[6] == "rate-limited by filter r"
    # two running jobs of the rule: nothing more of it starts
    sel = run([job(6), job(8)], verdict, running_jobs=[running(2), running(4)])
    assert sel.start == []


def test_pause_running_jobs_and_unpause_them() -> None:
    pause_1 = chain(Rule("p", 0, is_1, "PAUSE"))
    sel = run([], pause_1, running_jobs=[running(1), running(2)])
    assert sel.pause == [1] and sel.unpause == []
    paused = pause_job(running(1))
    sel = run([], pause_1, running_jobs=[paused])
    assert sel.pause == [] and sel.unpause == []
    sel = run([], NO_VERDICT, running_jobs=[paused])
    assert sel.unpause == [1]


def test_reject_does_not_touch_running_jobs() -> None:
    sel = run([], chain(Rule("u", 0, ALWAYS, "REJECT")), running_jobs=[running(1)])
    assert sel.cancel == [] and sel.pause == []


def test_paused_job_without_process_resumes_when_the_rule_goes() -> None:
    from luxid.jobs import finish_opcode, process_exited

    j = job(1)
    j = new_job(1, [j.ops[0].input, j.ops[0].input], 1.0)
    j = mark_opcode_running(start_job(j, 1.0, 10, 1.0), 0, 2.0)
    j = process_exited(finish_opcode(pause_job(j), 0, 3.0, True), 4.0)
    assert run([j], chain(Rule("p", 0, ALWAYS, "PAUSE"))).pending == {1: "paused by filter p"}
    assert run([j]).start == [1]


# -------------------------------------------------------- vectors 25-26 (buckets)


def test_vector_25_reason_buckets() -> None:
    jobs = [job(i, reason="rate-limit:2:hello") for i in (1, 2, 3)]
    assert run(jobs[:1]).start == [1]
    assert run(jobs[:2]).start == [1, 2]
    sel = run(jobs)
    assert sel.start == [1, 2] and sel.pending[3] == "rate-limit bucket 2:hello full"


def test_vector_26_running_jobs_fill_buckets() -> None:
    j1 = running(1, reason="rate-limit:2:hello")
    j2, j3 = (job(i, reason="rate-limit:2:hello") for i in (2, 3))
    assert run([j2, j3], running_jobs=[j1]).start == [2]
    j2_running = running(2, reason="rate-limit:2:hello")
    assert run([j3], running_jobs=[j1, j2_running]).start == []


def test_buckets_with_same_label_and_different_n_are_separate() -> None:
    jobs = [
        job(1, reason="rate-limit:1:x"),
        job(2, reason="rate-limit:2:x"),
        job(3, reason="rate-limit:1:x"),
    ]
    sel = run(jobs)
    assert sel.start == [1, 2] and sel.pending[3] == "rate-limit bucket 1:x full"


def test_jobs_outside_full_buckets_still_start() -> None:
    sel = run(
        [job(2, reason="rate-limit:1:a"), job(3)],
        running_jobs=[running(1, reason="rate-limit:1:a")],
    )
    assert sel.start == [3]


def test_held_jobs_take_no_bucket_slot() -> None:
    """Beyond Ganeti: a job paused by a filter does not use up a reason-bucket slot."""
    pause_1 = chain(Rule("p", 0, is_1, "PAUSE"))
    sel = run([job(1, reason="rate-limit:1:a"), job(2, reason="rate-limit:1:a")], pause_1)
    assert sel.start == [2]


# ---------------------------------------------------------------- dependencies


def test_dependency_reasons_and_actions() -> None:
    dep_running = running(1)
    waiting = job(2, depends=[[-1, ["success"]]])
    sel = run([waiting], running_jobs=[dep_running])
    assert sel.pending == {2: "waiting for job 1"} and sel.start == []

    from luxid.jobs import cancel_job, finish_opcode

    ok = finish_opcode(running(1), 0, 3.0, True)
    failed = finish_opcode(running(3), 0, 3.0, False)
    canceled = cancel_job(job(5), 3.0).job
    queued = [
        job(2, depends=[[1, ["success"]]]),
        job(4, depends=[[3, ["success"]]]),
        job(6, depends=[[5, ["success"]]]),
        job(7, depends=[[3, []]]),
        job(8, depends=[[100, []]]),
    ]
    sel = select_jobs(
        queued, [], 20, NO_VERDICT, NO_BUCKETS, statuses_of(ok, failed, canceled, *queued)
    )
    assert sel.start == [2, 7]
    assert sel.cancel == [(6, "Dependency job 5 was cancelled")]
    assert [f[0] for f in sel.fail] == [4, 8]


def test_reject_wins_over_a_dependency_wait() -> None:
    sel = run([job(2, depends=[[-1, []]])], chain(Rule("u", 0, ALWAYS, "REJECT")), [running(1)])
    assert sel.cancel == [(2, "rejected by filter u")]


# ------------------------------------------------------------------ properties

RULES = [
    None,
    Verdict("ACCEPT", "acc"),
    Verdict("PAUSE", "pau"),
    Verdict("REJECT", "rej"),
    Verdict("RATE_LIMIT", "rl1", 1),
    Verdict("RATE_LIMIT", "rl3", 3),
]
BUCKETS = ["1:a", "2:b", "3:c"]

job_specs = st.lists(
    st.tuples(
        st.integers(min_value=-20, max_value=19),  # priority
        st.integers(min_value=0, max_value=len(RULES) - 1),  # verdict
        st.sets(st.sampled_from(BUCKETS), max_size=2),  # buckets
        st.booleans(),  # running?
        st.sampled_from([None, "success", "running", "error"]),  # a dependency's status
    ),
    max_size=60,
)


@dataclass
class Scene:
    """The jobs and lookups a property test's specs describe."""

    verdicts: dict[int, Verdict | None]
    buckets: dict[int, frozenset[str]]
    queued: list[Job]
    running: list[Job]
    dep_status: dict[int, str]


def scene(specs: list[Any]) -> Scene:
    s = Scene({}, {}, [], [], {})
    for i, (prio, rule, bks, is_running, dep) in enumerate(specs, start=1000):
        if dep is not None:
            s.dep_status[i - 999] = dep  # ids 1..n are plain dependencies, not in the queue
            j = job(i, prio, depends=[[i - 999, []]])
        else:
            j = job(i, prio)
        s.verdicts[i] = RULES[rule]
        s.buckets[i] = frozenset(bks)
        if is_running:
            j = mark_opcode_running(start_job(j, 1.0, i, 1.0), 0, 2.0)
            s.running.append(j)
        else:
            s.queued.append(j)
    return s


@settings(max_examples=300, deadline=None)
@given(job_specs, st.integers(min_value=0, max_value=12))
def test_selection_properties(specs: list[Any], max_running: int) -> None:
    sc = scene(specs)
    verdicts, buckets, queued, running_jobs, dep_status = (
        sc.verdicts,
        sc.buckets,
        sc.queued,
        sc.running,
        sc.dep_status,
    )

    def status_of(jid: int) -> str | None:
        if jid in dep_status:
            return dep_status[jid]
        return None

    sel = select_jobs(
        queued,
        running_jobs,
        max_running,
        lambda j: verdicts[j.id],
        lambda j: buckets[j.id],
        status_of,
    )
    prio = {j.id: (j.ops[0].priority, j.id) for j in queued}
    started = set(sel.start)
    canceled = {c[0] for c in sel.cancel}
    failed = {f[0] for f in sel.fail}
    held = {jid for jid, r in sel.pending.items() if r is not None}

    # every queued job gets exactly one outcome
    assert started | canceled | failed | held == set(prio)
    assert len(started) + len(canceled) + len(failed) + len(held) == len(prio)
    assert started == {jid for jid, r in sel.pending.items() if r is None}
    assert sel.start == sorted(sel.start, key=prio.__getitem__)

    # never more than max_running_jobs running
    assert len(running_jobs) + len(started) <= max(max_running, len(running_jobs))

    # never more than n per RATE_LIMIT rule or bucket (unless already over before the pass)
    for verdict in RULES:
        if verdict is None or verdict.action != "RATE_LIMIT":
            continue
        before = sum(verdicts[j.id] == verdict for j in running_jobs)
        new = sum(verdicts[jid] == verdict for jid in started)
        assert new == 0 or before + new <= verdict.rate_limit
    for key in BUCKETS:
        before = sum(key in buckets[j.id] for j in running_jobs)
        new = sum(key in buckets[jid] for jid in started)
        assert new == 0 or before + new <= int(key[0])

    # filters do what they say
    for jid in prio:
        verdict = verdicts[jid]
        if verdict is not None and verdict.action == "REJECT":
            assert (jid, "rejected by filter rej") in sel.cancel
        if verdict is not None and verdict.action == "PAUSE":
            assert jid not in started
    for j in running_jobs:
        verdict = verdicts[j.id]
        assert (j.id in sel.pause) == (verdict is not None and verdict.action == "PAUSE")

    # a more urgent job is never skipped for a less urgent one, unless a filter, a
    # bucket or a dependency holds it
    for h in held:
        if sel.pending[h] == REASON_MAX_RUNNING:
            assert len(running_jobs) + len(started) >= max_running
            assert all(prio[h] > prio[s] for s in started)


@settings(max_examples=300, deadline=None)
@given(job_specs, st.integers(min_value=0, max_value=12))
def test_fill_starts_what_a_full_pass_starts(specs: list[Any], max_running: int) -> None:
    """After a job end, filling the free slots starts the very jobs a full pass would, in
    the same order, and decides each examined job as the full pass does; it stops at the
    first job after the last free slot."""
    sc = scene(specs)
    queued, running_jobs = sc.queued, sc.running
    args = (running_jobs, max_running, lambda j: sc.verdicts[j.id], lambda j: sc.buckets[j.id],
            sc.dep_status.get)  # fmt: skip
    full = select_jobs(queued, *args)
    in_order = sorted(queued, key=queue_order)
    fill = fill_free_slots(in_order, *args)

    assert fill.start == full.start
    for jid, reason in fill.pending.items():
        assert full.pending[jid] == reason
    assert set(fill.cancel) <= set(full.cancel) and set(fill.fail) <= set(full.fail)
    assert fill.pause == full.pause and fill.unpause == full.unpause
    examined = set(fill.pending) | {c[0] for c in fill.cancel} | {f[0] for f in fill.fail}
    free = max_running - len(running_jobs)
    if free <= 0:
        assert not examined
    else:
        # a prefix of the queue order, ending once every slot is taken
        prefix = [j.id for j in in_order[: len(examined)]]
        assert set(prefix) == examined
        if len(examined) < len(in_order):
            assert len(fill.start) == free


# ----------------------------------------------------------------------- speed


def _pass_time(n: int) -> float:
    queued = [
        job(i, priority=(i * 7) % 21 - 10, reason=f"rate-limit:5:b{i % 50}")
        for i in range(1, n + 1)
    ]
    running_jobs = [running(n + i) for i in range(1, 11)]
    verdicts = [None, Verdict("ACCEPT", "a"), Verdict("RATE_LIMIT", "r", 5), Verdict("PAUSE", "p")]
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        select_jobs(
            queued,
            running_jobs,
            20,
            lambda j: verdicts[j.id % 4],
            reason_buckets,
            lambda jid: None,
        )
        best = min(best, time.perf_counter() - t0)
    return best


def test_pass_over_10000_queued_jobs_is_fast_and_not_quadratic() -> None:
    t10k = _pass_time(10_000)
    assert t10k <= 0.200, f"scheduling pass took {t10k * 1e3:.1f} ms"
    t40k = _pass_time(40_000)
    # linear-ish (n log n) would be ~4x; quadratic would be ~16x
    assert t40k / t10k < 8, f"10k: {t10k * 1e3:.1f} ms, 40k: {t40k * 1e3:.1f} ms"
