"""Verdicts carried over rule changes (luxid.filters.delta, luxid.filters.job_index, through
luxid.active_filters): whatever the rules were, whatever changed and whichever jobs were
judged before, every verdict is the one a chain built from scratch gives."""

from __future__ import annotations

from typing import Any
from unittest.mock import patch

from filters_testlib import uid
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_filter_properties import (
    ACTIONS,
    op_strategy,
    predicate_strategy,
    rules_strategy,
    similar_predicate,
)

from client._server.metrics import Registry
from luxid.active_filters import ActiveFilters, filter_job
from luxid.filters import FilterChain, FilterRule, bulk
from luxid.filters.compile import compile_rule
from luxid.filters.job_index import JobIndex
from luxid.jobs import Job
from luxid.jobs.model import OpCode

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def make_job(job_id: int, ops: list[dict[str, Any]]) -> Job:
    return Job(id=job_id, ops=tuple(OpCode(input=op) for op in ops), received_ts=1.0)


jobs_strategy = st.lists(
    st.tuples(st.integers(1, 14), st.lists(op_strategy, min_size=1, max_size=3)),
    min_size=1, max_size=10, unique_by=lambda t: t[0],
).map(lambda pairs: [make_job(i, ops) for i, ops in pairs])  # fmt: skip


@st.composite
def changed(draw: st.DrawFn, rules: list[FilterRule]) -> list[FilterRule]:
    """`rules` with some dropped, some altered (priority, action or predicates) and some
    added (fresh uuids)."""
    out = []
    for rule in rules:
        what = draw(st.sampled_from(["keep", "keep", "drop", "priority", "action", "predicates"]))
        if what == "priority":
            rule = FilterRule(**{**_fields(rule), "priority": draw(st.integers(0, 3))})
        elif what == "action":
            rule = FilterRule(**{**_fields(rule), "action": draw(st.sampled_from(ACTIONS))})
        elif what == "predicates":
            preds = draw(st.lists(predicate_strategy(False), max_size=2))
            rule = FilterRule(**{**_fields(rule), "predicates": preds})
        if what != "drop":
            out.append(rule)
    fresh = draw(rules_strategy(max_size=3))
    taken = {r.uuid for r in out}
    return out + [r for r in fresh if r.uuid not in taken]


def _fields(rule: FilterRule) -> dict[str, Any]:
    return {f: getattr(rule, f) for f in rule.__struct_fields__}


@SETTINGS
@given(st.data(), rules_strategy(max_size=10), jobs_strategy)
def test_verdicts_after_changes_are_those_of_a_fresh_chain(
    data: st.DataObject, rules: list[FilterRule], jobs: list[Job]
) -> None:
    filters = ActiveFilters(Registry("luxid"))
    filters.replace_all(rules)
    for _ in range(data.draw(st.integers(1, 3))):
        judged = data.draw(st.lists(st.sampled_from(jobs), unique_by=lambda j: j.id))
        for job in judged:  # some jobs judged (remembered) under these rules, some not
            filters.verdict(job)
        rules = data.draw(changed(rules))
        filters.replace_all(rules)
    if data.draw(st.booleans()):
        filters.forget(jobs[0].id)
    fresh = FilterChain(rules)
    for job in jobs:
        assert filters.verdict(job) == fresh.verdict(filter_job(job))


# Rules of each kind the chain indexes (parameter values, OP_IDs, reason texts, regexes,
# id ranges), beside arbitrary ones.
indexed_rules = st.lists(st.lists(similar_predicate, min_size=1, max_size=2), max_size=8).map(
    lambda preds: [
        FilterRule(uuid=uid(i), priority=0, watermark=3, predicates=p, action="PAUSE")
        for i, p in enumerate(preds)
    ]
)


@SETTINGS
@given(st.one_of(rules_strategy(max_size=8), indexed_rules), jobs_strategy)
def test_the_index_finds_every_job_a_rule_matches(rules: list[FilterRule], jobs: list[Job]) -> None:
    index = JobIndex()
    views = [filter_job(job) for job in jobs]
    for view in views:
        index.add(view)
    index.remove(views[0])
    for rule in rules:
        cr = compile_rule(rule)
        reach = index.candidates(cr)
        for view in views[1:]:
            if cr.verdict is not None and cr.matches(view):
                assert reach is None or view.id in reach
        assert reach is None or views[0].id not in reach


@SETTINGS
@given(st.one_of(rules_strategy(), indexed_rules), jobs_strategy, st.integers(0, 40))
def test_judging_all_at_once_agrees_with_the_chain(
    rules: list[FilterRule], jobs: list[Job], floor: int
) -> None:
    views = {job.id: filter_job(job) for job in jobs}
    index = JobIndex()
    for view in views.values():
        index.add(view)
    with patch.object(bulk, "WORK_FLOOR", floor):  # small floors leave some to the chain
        judged = bulk.judge_all(FilterChain(rules), index, views, list(views)[1:])
    fresh = FilterChain(rules)
    assert set(judged) <= set(views) - {jobs[0].id}
    for job_id, verdict in judged.items():
        assert verdict == fresh.verdict(views[job_id])
