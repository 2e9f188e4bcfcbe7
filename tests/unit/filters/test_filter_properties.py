"""Property tests of the filter chain.

- the indexed evaluator agrees with the linear one and with the reference written from
  Ganeti's semantics (filters_testlib), on random rules (valid or not) and jobs;
- adding a CONTINUE rule never changes a decision;
- rules after the applying one are never consulted (replacing them changes nothing);
- the order is (priority, watermark, uuid), whatever order the rules come in;
- RATE_LIMIT n and reason buckets never let more than n run, over a random run of passes;
- validation and chain building raise nothing but FilterError on arbitrary JSON.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from typing import Any

import msgspec
from filters_testlib import ref_verdict, rule_of, select, uid, verdict_linear, verdicts
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from client.errors import FilterError
from luxid.filters import FilterChain, FilterJob, FilterRule, bucket_limit, make_rule

# The differential tests get more examples than the others; the whole file stays ~20 s.
DIFFERENTIAL = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
SETTINGS = settings(max_examples=70, deadline=None, suppress_health_check=[HealthCheck.too_slow])

OP_IDS = ["OP_A", "OP_B", "OP_C", "OP_TEST_DELAY"]
STRS = ["", "a", "b", "web1", "OP_A", "OP_B", "watermark", "pink bunny", "rate-limit:2:x"]
REGEXES = ["^OP_", "A$", "a|b", "(?i)PINK", "b", "^$", "bunny", r"(x)\1", "rate", "(?P<n>a)"]
SOURCES = ["gnt:client", "lw:opcode:op_a", "tool"]
TEXTS = ["pink bunny", "allow this", "rate-limit:2:x", "rate-limit:1:y", "job=1;index=0", "b"]

ints = st.integers(-2, 12)
values = st.one_of(st.sampled_from(STRS + OP_IDS), ints)
COMPARE = ["==", "=", "!=", "<", ">", "<=", ">="]


def expr_strategy(fields: list[str], regexes: list[str] = REGEXES) -> st.SearchStrategy[Any]:
    field = st.sampled_from(fields)
    leaf = st.one_of(
        st.tuples(st.sampled_from(COMPARE), field, values).map(list),
        st.tuples(st.just("=~"), field, st.sampled_from(regexes)).map(list),
        st.tuples(st.just("=[]"), field, values).map(list),
        st.tuples(st.just("?"), field).map(list),
    )
    return st.recursive(
        st.one_of(st.just(None), leaf, leaf, leaf),
        lambda kids: st.one_of(
            st.lists(kids, max_size=3).map(lambda xs: ["&", *xs]),
            st.lists(kids, max_size=3).map(lambda xs: ["|", *xs]),
            kids.map(lambda x: ["!", x]),
        ),
        max_leaves=5,
    )


# Lenient field pools include names Ganeti evaluates as invalid; strict ones only valid ones.
JOBID_FIELDS = ["id", "id", "id", "other"]
OPCODE_FIELDS = ["OP_ID", "OP_ID", "name", "size", "flag", "tags", "nested.a", "comment", "nope"]
REASON_FIELDS = ["reason", "reason", "source", "timestamp", "bad"]


def _predicates(strict: bool) -> st.SearchStrategy[list[Any]]:
    jobid = ["id"] if strict else JOBID_FIELDS
    reason = REASON_FIELDS[:-1] if strict else REASON_FIELDS
    return st.one_of(
        st.tuples(st.just("jobid"), expr_strategy(jobid)).map(list),
        st.tuples(st.just("opcode"), expr_strategy(OPCODE_FIELDS)).map(list),
        st.tuples(st.just("reason"), expr_strategy(reason)).map(list),
    )


# Built once: building recursive strategies per draw is what makes hypothesis slow.
PREDICATES = {True: _predicates(True), False: _predicates(False)}


def predicate_strategy(strict: bool) -> st.SearchStrategy[list[Any]]:
    return PREDICATES[strict]


ACTIONS: list[Any] = ["ACCEPT", "PAUSE", "REJECT", "CONTINUE", ["RATE_LIMIT", 1], ["RATE_LIMIT", 2]]


@st.composite
def rules_strategy(draw: st.DrawFn, strict: bool = False, max_size: int = 14) -> list[FilterRule]:
    n = draw(st.integers(0, max_size))
    ids = draw(st.lists(st.integers(0, 99), min_size=n, max_size=n, unique=True))
    out = []
    for i in ids:
        out.append(
            FilterRule(
                uuid=uid(i),
                priority=draw(st.integers(0, 3)),
                watermark=draw(st.integers(0, 12)),
                predicates=draw(st.lists(predicate_strategy(strict), max_size=3)),
                action=draw(st.sampled_from(ACTIONS)),
            )
        )
    return out


reason_entry = st.tuples(st.sampled_from(SOURCES), st.sampled_from(TEXTS), st.integers(0, 5))
op_strategy = st.fixed_dictionaries(
    {"OP_ID": st.sampled_from(OP_IDS), "reason": st.lists(reason_entry.map(list), max_size=3)},
    optional={
        "name": st.one_of(st.sampled_from(STRS), ints, st.booleans()),
        "size": st.one_of(ints, st.sampled_from([0.0, 2.5, 3.0])),
        "flag": st.booleans(),
        "tags": st.one_of(st.lists(st.sampled_from(STRS), max_size=3), st.lists(ints, max_size=3)),
        "nested": st.fixed_dictionaries({"a": st.sampled_from(STRS)}),
        "comment": st.sampled_from(STRS),
        "priority": ints,
    },
)
job_strategy = st.builds(FilterJob, st.integers(1, 12), st.lists(op_strategy, max_size=3))
jobs_strategy = st.lists(job_strategy, min_size=1, max_size=8)


def check_all(rules: list[FilterRule], jobs: list[FilterJob]) -> None:
    chain = FilterChain(rules)
    expected = [ref_verdict(rules, j) for j in jobs]
    assert [verdict_linear(chain, j) for j in jobs] == expected
    assert verdicts(chain, jobs) == expected
    # again, from the memos, in another order
    assert verdicts(chain, jobs[::-1]) == expected[::-1]


@DIFFERENTIAL
@given(rules_strategy(), jobs_strategy)
def test_index_agrees_with_reference(rules: list[FilterRule], jobs: list[FilterJob]) -> None:
    check_all(rules, jobs)


# Many similar rules: exercises the OP_ID / value / id indexes, regex chunks and the
# projection memo (which needs several candidates reading the same fields).
similar_predicate = st.one_of(
    st.tuples(
        st.just("opcode"),
        st.tuples(st.just("=="), st.just("OP_ID"), st.sampled_from(OP_IDS)).map(list),
    ).map(list),
    st.tuples(
        st.just("opcode"),
        st.tuples(st.sampled_from(["<", ">", "=="]), st.just("size"), ints).map(list),
    ).map(list),
    st.tuples(
        st.just("opcode"),
        st.tuples(
            st.just("&"),
            st.tuples(st.just("=="), st.just("OP_ID"), st.sampled_from(OP_IDS)).map(list),
            st.tuples(st.sampled_from([">", "<="]), st.just("size"), ints).map(list),
        ).map(list),
    ).map(list),
    st.tuples(
        st.just("opcode"),
        st.tuples(st.just("=="), st.just("name"), st.sampled_from(STRS)).map(list),
    ).map(list),
    st.tuples(
        st.just("reason"),
        st.tuples(st.just("=~"), st.just("reason"), st.sampled_from(REGEXES)).map(list),
    ).map(list),
    st.tuples(
        st.just("reason"),
        st.tuples(
            st.just("=="), st.sampled_from(["reason", "source"]), st.sampled_from(TEXTS + SOURCES)
        ).map(list),
    ).map(list),
    st.tuples(
        st.just("jobid"),
        st.tuples(
            st.sampled_from(COMPARE), st.just("id"), st.one_of(ints, st.just("watermark"))
        ).map(list),
    ).map(list),
)


@st.composite
def similar_rules(draw: st.DrawFn) -> list[FilterRule]:
    n = draw(st.integers(0, 40))
    ids = draw(st.lists(st.integers(0, 999), min_size=n, max_size=n, unique=True))
    return [
        FilterRule(
            uuid=uid(i),
            priority=draw(st.integers(0, 2)),
            watermark=draw(st.integers(0, 12)),
            predicates=draw(st.lists(similar_predicate, min_size=1, max_size=3)),
            action=draw(st.sampled_from(ACTIONS)),
        )
        for i in ids
    ]


@DIFFERENTIAL
@given(similar_rules(), st.lists(job_strategy, min_size=1, max_size=16))
def test_index_agrees_with_reference_on_many_similar_rules(
    rules: list[FilterRule], jobs: list[FilterJob]
) -> None:
    check_all(rules, jobs)


multi_op_jobs = st.lists(
    st.builds(FilterJob, st.integers(1, 12), st.lists(op_strategy, min_size=2, max_size=3)),
    min_size=1,
    max_size=12,
)


# Predicates that each need one opcode / reason entry with a given value: the ones whose
# index guards must not be combined across predicates.
single_value_predicate = st.one_of(
    st.sampled_from(OP_IDS).map(lambda v: ["opcode", ["==", "OP_ID", v]]),
    st.sampled_from(STRS).map(lambda v: ["opcode", ["==", "name", v]]),
    st.sampled_from(TEXTS).map(lambda v: ["reason", ["==", "reason", v]]),
    st.sampled_from(SOURCES).map(lambda v: ["reason", ["==", "source", v]]),
    st.sampled_from(REGEXES).map(lambda v: ["reason", ["=~", "reason", v]]),
)


@DIFFERENTIAL
@given(st.lists(single_value_predicate, min_size=2, max_size=3), st.integers(0, 12), multi_op_jobs)
# The regression: the index once intersected the OP_IDs required by two predicates.
@example(
    [["opcode", ["==", "OP_ID", "OP_A"]], ["opcode", ["==", "OP_ID", "OP_B"]]],
    0,
    [FilterJob(1, [{"OP_ID": "OP_A"}, {"OP_ID": "OP_B"}])],
)
def test_each_predicate_finds_its_own_opcode_or_entry(
    predicates: list[Any], watermark: int, jobs: list[FilterJob]
) -> None:
    """One rule, several predicates, jobs of several opcodes: each predicate may be
    satisfied by a different opcode or reason entry."""
    r = FilterRule(
        uuid=uid(1), priority=0, watermark=watermark, predicates=predicates, action="PAUSE"
    )
    check_all([r], jobs)


@DIFFERENTIAL
@given(rules_strategy(strict=True), jobs_strategy)
def test_valid_rules_pass_validation_and_agree(
    rules: list[FilterRule], jobs: list[FilterJob]
) -> None:
    made = [
        make_rule(r.uuid, r.priority, r.predicates, r.action, [], watermark=r.watermark, now_ns=1)
        for r in rules
    ]
    check_all(made, jobs)


@SETTINGS
@given(
    rules_strategy(),
    predicate_strategy(strict=False).map(lambda p: [p]) | st.just([]),
    st.integers(0, 3),
    st.integers(0, 12),
    jobs_strategy,
)
def test_adding_continue_changes_nothing(
    rules: list[FilterRule], preds: list[Any], priority: int, watermark: int, jobs: list[FilterJob]
) -> None:
    extra = FilterRule(
        uuid=uid(500), priority=priority, watermark=watermark, predicates=preds, action="CONTINUE"
    )
    before = FilterChain(rules)
    after = FilterChain([*rules, extra], previous=before)
    assert verdicts(after, jobs) == verdicts(before, jobs)


@SETTINGS
@given(rules_strategy(), rules_strategy(), job_strategy)
def test_rules_after_the_applying_one_are_never_consulted(
    rules: list[FilterRule], others: list[FilterRule], j: FilterJob
) -> None:
    chain = FilterChain(rules)
    v = chain.verdict(j)
    if v is None:
        return
    applying = rule_of(chain, v.rule_uuid)
    assert applying is not None
    pos = chain.rules.index(applying)
    # keep the prefix up to the applying rule, replace everything after it by other rules
    # ordered after it (a higher priority number)
    later = [
        msgspec.structs.replace(o, uuid=uid(200 + i), priority=applying.priority + 1 + o.priority)
        for i, o in enumerate(others)
    ]
    assert FilterChain([*chain.rules[: pos + 1], *later]).verdict(j) == v


@SETTINGS
@given(rules_strategy(), st.randoms(use_true_random=False), jobs_strategy)
def test_order_is_priority_watermark_uuid(
    rules: list[FilterRule], rnd: Any, jobs: list[FilterJob]
) -> None:
    shuffled = list(rules)
    rnd.shuffle(shuffled)
    chain = FilterChain(shuffled)
    assert list(chain.rules) == sorted(rules, key=lambda r: (r.priority, r.watermark, r.uuid))
    assert verdicts(chain, jobs) == verdicts(FilterChain(rules), jobs)
    for j, v in zip(jobs, verdicts(chain, jobs), strict=True):
        if v is not None:
            # no rule before the applying one both matches and is not CONTINUE
            applying = rule_of(chain, v.rule_uuid)
            assert applying is not None
            for r in chain.rules[: chain.rules.index(applying)]:
                assert r.action == "CONTINUE" or ref_verdict([r], j) is None


# -- RATE_LIMIT n and buckets never let n+1 run -----------------------------------------------


@SETTINGS
@given(
    rules_strategy(max_size=8),
    st.lists(job_strategy, min_size=1, max_size=20),
    st.lists(st.one_of(st.just("pass"), st.integers(0, 30)), max_size=40),
    st.integers(1, 30),
)
def test_rate_limits_hold_over_a_run(
    rules: list[FilterRule], jobs: list[FilterJob], steps: list[Any], max_running: int
) -> None:
    """Random passes and job ends; after every pass, count what runs."""
    # distinct ids, queue in id order
    by_id = {j.id: j for j in jobs}
    queued = sorted(by_id.values(), key=lambda j: j.id)
    running: list[FilterJob] = []
    chain = FilterChain(rules)
    for step in [*steps, "pass"]:
        if step == "pass":
            started = select(chain, queued, running, max_running=max_running)
            running += [by_id[i] for i in started]
            queued = [j for j in queued if j.id not in started]
            current = verdicts(chain, running)
            assert len(running) <= max(max_running, 0)
            per_rule = Counter(v.rule_uuid for v in current if v and v.action == "RATE_LIMIT")
            for v in current:
                if v is not None:
                    assert v.action in ("ACCEPT", "RATE_LIMIT")  # PAUSE/REJECT never start
                    if v.action == "RATE_LIMIT":
                        assert per_rule[v.rule_uuid] <= v.rate_limit
            per_bucket = Counter(b for j in running for b in j.buckets)
            for bucket, count in per_bucket.items():
                assert count <= bucket_limit(bucket)
        elif running:
            running.pop(step % len(running))  # a job ends


# -- robustness on arbitrary input ------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5)),
    lambda kids: st.one_of(
        st.lists(kids, max_size=4),
        st.dictionaries(st.text(max_size=4), kids, max_size=3),
    ),
    max_leaves=10,
)
op_names = st.sampled_from(["&", "|", "!", "?", "==", "=", "!=", "<", "=~", "=[]", "x"])
exprish = st.recursive(
    st.one_of(json_values, st.tuples(op_names, json_values, json_values).map(list)),
    lambda kids: st.tuples(op_names, kids, kids).map(list),
    max_leaves=8,
)


@SETTINGS
@given(
    st.one_of(
        json_values,
        st.lists(
            st.tuples(st.sampled_from(["jobid", "opcode", "reason", "x"]), exprish).map(list),
            max_size=3,
        ),
    ),
    json_values,
    json_values,
)
def test_validation_raises_only_filter_error(predicates: Any, action: Any, priority: Any) -> None:
    with contextlib.suppress(FilterError):  # anything else fails the test
        make_rule(uid(1), priority, predicates, action, [], watermark=0)


@SETTINGS
@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(["uuid", "priority", "watermark", "predicates", "action", "x"]),
            st.one_of(json_values, exprish),
        ),
        max_size=4,
    ),
    job_strategy,
)
def test_chain_never_raises_on_stored_junk(stored: list[dict[str, Any]], j: FilterJob) -> None:
    chain = FilterChain(stored)
    assert chain.verdict(j) == verdict_linear(chain, j)
