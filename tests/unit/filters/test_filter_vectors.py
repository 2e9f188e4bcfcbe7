"""The acceptance vectors of Ganeti's job queue that concern filters and rate limits
(1-29, 37, 38, 39), table-driven.  Vectors 30-36 (job status, priorities, cancel,
dependencies, paths) belong to the job model, not to this package."""

from __future__ import annotations

from typing import Any

import pytest
from filters_testlib import job, ref_verdict, rule, select, uid, verdict_linear

from client.errors import FilterError
from luxid.filters import (
    FilterChain,
    bucket_of,
    evaluate_json,
    make_rule,
    parse,
    parse_action_text,
    parse_reason_rate_limit,
    validate_action,
)
from luxid.filters import query as q

# -- 1-13 and 39: one predicate on j1, watermark 1 ---------------------------------------------

PREDICATE_VECTORS: list[tuple[str, list[Any], bool]] = [
    ("1", ["jobid", ["==", "id", 1]], True),
    ("2", ["jobid", ["==", "id", 2]], False),
    ("3", ["jobid", ["==", "id", "1"]], False),
    ("4", ["jobid", ["==", "id", "watermark"]], True),
    ("5", ["opcode", ["==", "OP_ID", "OP_CLUSTER_RENAME"]], True),
    ("6", ["opcode", ["==", "OP_ID", "OP_INSTANCE_CREATE"]], False),
    ("7", ["opcode", ["==", "name", "cluster1"]], True),
    ("8", ["opcode", ["==", "something", "cluster1"]], False),
    ("9", ["reason", ["==", "reason", "reason1"]], True),
    ("10", ["reason", ["==", "reason", "reasonGarbage"]], False),
    ("11", ["reason", ["==", "source", "source1"]], True),
    ("12", ["reason", ["==", "timestamp", 1234]], True),
    ("13", ["reason", ["==", "something", ""]], False),
    ("39a", ["jobid", ["!", ["=~", "id", "x"]]], False),
    ("39b", ["jobid", ["|", ["==", "id", 1], ["=~", "id", "x"]]], True),
    ("39c", ["opcode", ["|", ["==", "OP_ID", "OP_CLUSTER_RENAME"], ["==", "nope", "x"]]], False),
]


@pytest.mark.parametrize(
    ("predicate", "expected"),
    [pytest.param(p, e, id=f"vector-{n}") for n, p, e in PREDICATE_VECTORS],
)
def test_predicate_vector(predicate: list[Any], expected: bool) -> None:
    """Each predicate, as the only predicate of an ACCEPT rule, applies to j1 iff expected."""
    r = rule(1, [predicate], "ACCEPT", watermark=1)
    chain = FilterChain([r])
    assert (chain.verdict(job(1)) is not None) is expected
    assert (verdict_linear(chain, job(1)) is not None) is expected
    assert (ref_verdict([r], job(1)) is not None) is expected


@pytest.mark.parametrize(
    ("predicate", "expected"),
    [pytest.param(p, e, id=f"vector-{n}") for n, p, e in PREDICATE_VECTORS],
)
def test_predicate_vector_direct(predicate: list[Any], expected: bool) -> None:
    """The same vectors through the query module's per-context compilers."""
    name, raw = predicate
    expr = parse(raw)
    j = job(1)
    if name == "jobid":
        got = q.compile_jobid(expr, 1)(j.id)
    elif name == "opcode":
        test = q.compile_opcode(expr, frozenset({"priority", "depends", "reason", "comment"}))
        got = any(test(op) for op in j.ops)
    else:
        got = any(q.compile_reason(expr)(e) for e in j.reasons)
    assert got is expected


# Of these, the ones naming a field that cannot exist are refused when a rule is added.
@pytest.mark.parametrize(
    ("predicate", "refused"),
    [
        (["reason", ["==", "something", ""]], "field 'something'"),
        (["jobid", ["==", "name", 1]], "field 'name'"),
    ],
)
def test_vectors_with_impossible_fields_are_refused_at_add_time(
    predicate: list[Any], refused: str
) -> None:
    with pytest.raises(FilterError, match=refused):
        make_rule(uid(1), 0, [predicate], "ACCEPT", [], watermark=1)


# -- 14-21: chains and a scheduling pass ------------------------------------------------------

ID1 = ["jobid", ["==", "id", 1]]
GT_WM = ["jobid", [">", "id", "watermark"]]

CHAIN_VECTORS: list[tuple[str, list[tuple[list[Any], Any]], list[int], list[int]]] = [
    ("14", [([ID1], "REJECT")], [1], []),
    ("15", [([ID1], "REJECT"), ([ID1], "ACCEPT")], [1], []),
    ("16", [([ID1], "ACCEPT"), ([ID1], "REJECT")], [1], [1]),
    ("17", [([ID1], "PAUSE")], [1], []),
    ("18", [([GT_WM], "REJECT")], [1, 2], [1]),
    ("19", [([], "REJECT")], [1, 2], []),
    ("20", [([], "CONTINUE"), ([], ["RATE_LIMIT", 2])], [1, 2, 3], [1, 2]),
    ("21", [([GT_WM], "CONTINUE"), ([GT_WM], ["RATE_LIMIT", 2])], [1, 2, 3, 4], [1, 2, 3]),
]


@pytest.mark.parametrize(
    ("rules", "queue", "run"),
    [pytest.param(r, qu, ru, id=f"vector-{n}") for n, r, qu, ru in CHAIN_VECTORS],
)
def test_chain_vector(rules: list[tuple[list[Any], Any]], queue: list[int], run: list[int]) -> None:
    """Rules in the listed order (priority 0, watermark 1, uuids increasing)."""
    chain = FilterChain([rule(i, p, a) for i, (p, a) in enumerate(rules)])
    assert select(chain, [job(n) for n in queue]) == run


# -- 22-26: reason rate limiting --------------------------------------------------------------


def test_vector_22_bucket_parse() -> None:
    assert parse_reason_rate_limit("rate-limit:20:my label") == ("20:my label", 20)
    assert parse_reason_rate_limit("rate-limit:21:my label") == ("21:my label", 21)


def test_vector_23_leading_space_is_not_a_bucket() -> None:
    assert parse_reason_rate_limit(" rate-limit:20:my label") is None
    assert bucket_of(" rate-limit:20:my label") is None


def test_vector_24_different_n_different_buckets() -> None:
    assert bucket_of("rate-limit:2:L") != bucket_of("rate-limit:3:L")
    a = job(1, reasons=[("s", "rate-limit:2:L", 1), ("s", "rate-limit:3:L", 2)])
    assert a.buckets == {"2:L", "3:L"}


def _hello(n: int) -> Any:
    return job(n, reasons=[("source1", "rate-limit:2:hello", 1234)])


@pytest.mark.parametrize(
    ("queue", "run"),
    [([1], [1]), ([1, 2], [1, 2]), ([1, 2, 3], [1, 2])],
)
def test_vector_25_bucket_admission(queue: list[int], run: list[int]) -> None:
    assert select(FilterChain(), [_hello(n) for n in queue]) == run


def test_vector_26_running_and_manipulated_jobs_take_slots() -> None:
    chain = FilterChain()
    assert select(chain, [_hello(2), _hello(3)], running=[_hello(1)]) == [2]
    # "manipulated" jobs (being started or changed) count as running
    assert select(chain, [_hello(3)], running=[_hello(1), _hello(2)]) == []


# -- 27: parsing ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("wire", "tree"),
    [
        (None, q.Empty()),
        (["&", None, None], q.And((q.Empty(), q.Empty()))),
        (["|", None, None], q.Or((q.Empty(), q.Empty()))),
        (["!", None], q.Not(q.Empty())),
        (["?", "field"], q.Truth("field")),
        (["==", "field", "val"], q.Compare("==", "field", "val")),
        (["<", "field", "val"], q.Compare("<", "field", "val")),
        ([">", "field", "val"], q.Compare(">", "field", "val")),
        (["<=", "field", "val"], q.Compare("<=", "field", "val")),
        ([">=", "field", "val"], q.Compare(">=", "field", "val")),
        (["=[]", "field", "val"], q.Contains("field", "val")),
        (["=", "field", "val"], q.Compare("==", "field", "val")),
        (["!=", "field", "val"], q.Not(q.Compare("==", "field", "val"))),
    ],
)
def test_vector_27_parse(wire: Any, tree: q.Expr) -> None:
    assert parse(wire) == tree


def test_vector_27_parse_regex() -> None:
    node = parse(["=~", "field", "val"])
    assert isinstance(node, q.Regex)
    assert (node.field, node.pattern) == ("field", "val")


# -- 28-29: the language on objects (the opcode evaluation rules) -----------------------------

NODES = [{"name": n, "pinst_cnt": 0, "sinst_cnt": 0, "offline": False} for n in ("na", "nb", "nc")]


def names(expr: Any) -> list[str]:
    return [n["name"] for n in NODES if evaluate_json(expr, n)]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (["==", "name", "nb"], ["nb"]),
        (["!", ["==", "name", "nb"]], ["na", "nc"]),
        (["&", ["<", "name", "nb"], [">", "name", "nb"]], []),
        (["&", ["<=", "name", "nb"], [">=", "name", "nb"]], ["nb"]),
        (["|", *[["==", "name", n] for n in ("na", "nb", "nc")]], ["na", "nb", "nc"]),
        (["&", *[["==", "name", n] for n in ("na", "nb", "nc")]], []),
        (["==", "pinst_cnt", 0], ["na", "nb", "nc"]),
        ([">", "sinst_cnt", 0], []),
        (["=~", "name", ".*"], ["na", "nb", "nc"]),
    ],
)
def test_vector_28_object_queries(expr: Any, expected: list[str]) -> None:
    assert names(expr) == expected


@pytest.mark.parametrize(
    "expr",
    [
        ["=~", "offline", "x"],  # regex on a bool
        ["==", "name", 1],  # string field vs integer: never equal
        ["?", "name"],  # truth of a string
        ["==", "offline", "s"],
        ["=[]", "name", "v"],  # contains on a non-list
    ],
)
def test_vector_29_type_mismatches_match_nothing(expr: Any) -> None:
    """Luxid's Query reports these as errors; in filter predicates they are just false."""
    assert names(expr) == []


# -- 37: actions ------------------------------------------------------------------------------


def test_vector_37_actions() -> None:
    with pytest.raises(FilterError):
        validate_action("accept")
    with pytest.raises(FilterError, match="positive integer"):
        validate_action(["RATE_LIMIT", 0])
    assert parse_action_text("RATE_LIMIT 10") == ["RATE_LIMIT", 10]
    with pytest.raises(FilterError, match="priority"):
        make_rule(uid(1), -1, [], "ACCEPT", [], watermark=0)


# -- 38: the QA scenarios, at the level of verdicts and a scheduling pass ---------------------


def delay(n: int, reason: str | None = None) -> Any:
    reasons = [("gnt:client", reason, 1)] if reason else [("gnt:client", "x", 1)]
    return job(n, reasons=reasons, ops=[{"OP_ID": "OP_TEST_DELAY", "duration": 0}])


def test_vector_38_reject_new_jobs() -> None:
    for preds in ([GT_WM], [["opcode", ["==", "OP_ID", "OP_TEST_DELAY"]]]):
        chain = FilterChain([make_rule(uid(1), 0, preds, "REJECT", [], watermark=5)])
        v = chain.verdict(delay(6))
        assert v is not None and v.action == "REJECT"


def test_vector_38_continue_then_reject_then_delete() -> None:
    cont = make_rule(uid(1), 0, [], "CONTINUE", [], watermark=5)
    rej = make_rule(uid(2), 1, [], "REJECT", [], watermark=5)
    chain = FilterChain([cont, rej])
    assert select(chain, [delay(6)]) == []
    chain = FilterChain([cont], previous=chain)
    assert select(chain, [delay(6)]) == [6]


@pytest.mark.parametrize("action", ["REJECT", "PAUSE"])
def test_vector_38_maintenance_exception(action: str) -> None:
    allow = make_rule(
        uid(1), 0, [["reason", ["==", "reason", "allow this"]]], "ACCEPT", [], watermark=5
    )
    block = make_rule(uid(2), 1, [GT_WM], action, [], watermark=5)
    chain = FilterChain([allow, block])
    plain, allowed = delay(6), delay(7, "allow this")
    v = chain.verdict(plain)
    assert v is not None and v.action == action
    assert select(chain, [plain, allowed]) == [7]
    assert select(FilterChain([], previous=chain), [plain]) == [6]


def test_vector_38_rate_limit_two_of_three() -> None:
    rl = make_rule(uid(1), 0, [], "RATE_LIMIT 2", [], watermark=0)
    jobs = [delay(n) for n in (1, 2, 3)]
    assert select(FilterChain([rl]), jobs) == [1, 2]
    hello = [job(n, reasons=[("c", "rate-limit:2:hello", 1)]) for n in (1, 2, 3)]
    assert select(FilterChain(), hello) == [1, 2]
    # once two run, the third stays queued in later passes
    assert select(FilterChain([rl]), jobs[2:], running=jobs[:2]) == []
