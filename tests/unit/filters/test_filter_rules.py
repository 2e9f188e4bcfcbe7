"""Filter rules: validation at add time (each error), the stored/wire shape, the order, and
the chain's behaviour on stored rules (lenient, reused compilation)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from filters_testlib import applying_rule, applying_verdict, job, rule, rule_of, uid, verdict_linear

from client.errors import FilterError, InvalidParams
from client.filterrules import check_filter_object
from luxid.filters import (
    FILTER_FIELDS,
    FilterChain,
    FilterRule,
    Verdict,
    action_text,
    filter_row,
    make_rule,
    order_key,
    parse_action_text,
    rule_from_wire,
    rule_to_wire,
    validate_action,
)

GOOD_PREDICATES = [
    ["jobid", [">", "id", "watermark"]],
    ["opcode", ["&", ["==", "OP_ID", "OP_TEST_DELAY"], ["=~", "on_nodes.x", "^n"]]],
    ["reason", ["|", ["=~", "reason", "pink"], ["==", "source", "s"], [">", "timestamp", 5]]],
]


def add(**kw: Any) -> FilterRule:
    args: dict[str, Any] = {
        "uuid": uid(1),
        "priority": 0,
        "predicates": GOOD_PREDICATES,
        "action": "ACCEPT",
        "reason_trail": [],
        "watermark": 7,
    }
    args.update(kw)
    return make_rule(**args)


# -- every validation error -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kw", "part", "message"),
    [
        # predicates
        ({"predicates": {"jobid": None}}, "predicates", "must be a list"),
        ({"predicates": ["jobid"]}, "predicates[0]", "must be [name, expression]"),
        ({"predicates": [[]]}, "predicates[0]", "must be [name, expression]"),
        ({"predicates": [["jobID", None]]}, "predicates[0]", "unknown predicate 'jobID'"),
        ({"predicates": [["status", None]]}, "predicates[0]", "unknown predicate 'status'"),
        ({"predicates": [["jobid"]]}, "predicates[0]", "exactly one expression, got 0"),
        ({"predicates": [["opcode", None, None]]}, "predicates[0]", "exactly one expression"),
        (
            {"predicates": [["jobid", None], ["opcode", ["~", "OP_ID", "x"]]]},
            "predicates[1] (opcode)",
            "unknown operator '~'",
        ),
        ({"predicates": [["reason", ["!", None, None]]]}, "predicates[0] (reason)", "takes one"),
        ({"predicates": [["jobid", ["==", "name", 1]]]}, "predicates[0] (jobid)", "'name'"),
        (
            {"predicates": [["jobid", ["&", ["==", "id", 1], ["<", "ID", 2]]]]},
            "predicates[0] (jobid)",
            "field 'ID' is not available in a jobid predicate",
        ),
        (
            {"predicates": [["reason", ["==", "text", "x"]]]},
            "predicates[0] (reason)",
            "field 'text' is not available in a reason predicate",
        ),
        (
            {"predicates": [["opcode", ["=~", "OP_ID", "OP_(INSTANCE"]]]},
            "predicates[0] (opcode)",
            "does not compile",
        ),
        (
            {"predicates": [["reason", ["=~", "reason", "*x"]]]},
            "predicates[0] (reason)",
            "does not compile",
        ),
        ({"predicates": [["jobid", ["==", "id", 1.5]]]}, "predicates[0] (jobid)", "value 1.5"),
        # priority
        ({"priority": -1}, "priority", "non-negative integer, got -1"),
        ({"priority": "1"}, "priority", "non-negative integer"),
        ({"priority": True}, "priority", "non-negative integer"),
        ({"priority": 1.0}, "priority", "non-negative integer"),
        # action
        ({"action": "accept"}, "action", "'accept' is not one of"),
        ({"action": "DROP"}, "action", "is not one of"),
        ({"action": "RATE_LIMIT"}, "action", "positive integer"),
        ({"action": "RATE_LIMIT x"}, "action", "positive integer"),
        ({"action": "RATE_LIMIT 0"}, "action", "positive integer"),
        ({"action": ["RATE_LIMIT", 0]}, "action", "positive integer"),
        ({"action": ["RATE_LIMIT", -3]}, "action", "positive integer"),
        ({"action": ["RATE_LIMIT", "5"]}, "action", "positive integer"),
        ({"action": ["RATE_LIMIT", True]}, "action", "positive integer"),
        ({"action": ["RATE_LIMIT", 2.0]}, "action", "positive integer"),
        ({"action": ["RATE_LIMIT"]}, "action", "positive integer"),
        ({"action": ["RATE_LIMIT", 1, 2]}, "action", "positive integer"),
        ({"action": ["ACCEPT"]}, "action", "is not one of"),
        ({"action": None}, "action", "is not one of"),
        # uuid and reason trail
        ({"uuid": "not-a-uuid"}, "uuid", "unable to parse UUID"),
        ({"uuid": "ABCDEF00-0000-4000-8000-000000000001"}, "uuid", "unable to parse UUID"),
        ({"uuid": None}, "uuid", "unable to parse UUID"),
        ({"reason_trail": "why"}, "reason", "must be a list"),
        ({"reason_trail": [["s", "t"]]}, "reason[0]", "[source, text, timestamp_ns]"),
        ({"reason_trail": [["s", "t", "now"]]}, "reason[0]", "[source, text, timestamp_ns]"),
        # numbers beyond signed 64 bits (docs/contracts.md#numbers)
        ({"priority": 2**64}, "priority", "does not fit in a signed 64-bit integer"),
        ({"priority": 10**30}, "priority", "does not fit in a signed 64-bit integer"),
        ({"watermark": 2**63}, "watermark", "does not fit in a signed 64-bit integer"),
        (
            {"predicates": [["jobid", ["<", "id", 10**30]]]},
            "predicates[0] (jobid)",
            "does not fit in a signed 64-bit integer",
        ),
        (
            {"predicates": [["opcode", ["==", "duration", -(2**63) - 1]]]},
            "predicates[0] (opcode)",
            "does not fit in a signed 64-bit integer",
        ),
        ({"predicates": [["jobid", ["==", "id", 1e300]]]}, "predicates[0] (jobid)", "64-bit"),
        ({"action": ["RATE_LIMIT", 2**64]}, "action", "positive integer below 2**63"),
        ({"reason_trail": [["s", "t", 2**64]]}, "reason[0]", "[source, text, timestamp_ns]"),
    ],
)
def test_validation_errors(kw: dict[str, Any], part: str, message: str) -> None:
    """replace_filter's checks (make_rule) and wconfd's (check_filter_object) refuse the
    same rule with the same FilterError."""
    stored = {"uuid": uid(1), "priority": 0, "predicates": GOOD_PREDICATES, "action": "ACCEPT",
              "reason_trail": [], "watermark": 7, **kw}  # fmt: skip
    for attempt in (lambda: add(**kw), lambda: check_filter_object(stored)):
        with pytest.raises(FilterError) as info:
            attempt()
        err = info.value
        assert err.code == -32042
        assert err.data["part"] == part
        assert err.message.startswith(f"{part}: ")
        assert message in err.message


def test_check_filter_object_takes_wconfd_defaults_and_good_rules() -> None:
    assert check_filter_object({"uuid": uid(3)}) is None
    assert check_filter_object(rule_to_wire(add(action=["RATE_LIMIT", 3]))) is None
    with pytest.raises(FilterError, match="a filter rule is an object"):
        check_filter_object([1, 2])


# What Ganeti accepts at parse time and evaluates as false is accepted here too.
@pytest.mark.parametrize(
    "predicate",
    [
        ["jobid", ["==", "id", "1"]],
        ["jobid", ["=~", "id", "x"]],
        ["jobid", ["?", "id"]],
        ["reason", ["?", "reason"]],
        ["reason", ["=[]", "source", "x"]],
        ["opcode", ["==", "anything.at.all", 1]],
        ["opcode", None],
        ["reason", None],
        ["jobid", None],
    ],
)
def test_evaluation_only_invalid_is_accepted(predicate: list[Any]) -> None:
    add(predicates=[predicate])


# -- building and the wire shape --------------------------------------------------------------


def test_make_rule_wire_shape() -> None:
    r = add(
        action="RATE_LIMIT 10",
        priority=3,
        reason_trail=[["gnt:user", "pink bunny", 5]],
        now_ns=99,
    )
    wire = rule_to_wire(r)
    assert wire == {
        "uuid": uid(1),
        "priority": 3,
        "watermark": 7,
        "predicates": GOOD_PREDICATES,
        "action": ["RATE_LIMIT", 10],
        "reason_trail": [["gnt:user", "pink bunny", 5], ["luxid", "", 99]],
        "serial_no": 0,
        "ctime": 0.0,
        "mtime": 0.0,
    }
    # JSON round trip through the stored form gives the same rule
    assert rule_from_wire(msgspec.json.decode(msgspec.json.encode(wire))) == r
    assert filter_row(r) == [
        uid(1),
        7,
        3,
        GOOD_PREDICATES,
        ["RATE_LIMIT", 10],
        wire["reason_trail"],
    ]
    assert filter_row(r, ["action", "uuid"]) == [["RATE_LIMIT", 10], uid(1)]
    assert tuple(FILTER_FIELDS) == (
        "uuid", "watermark", "priority", "predicates", "action", "reason_trail",
    )  # fmt: skip


def test_make_rule_copies_its_input() -> None:
    preds = [["jobid", ["==", "id", 1]]]
    r = add(predicates=preds)
    preds[0][1][2] = 2
    assert r.predicates == [["jobid", ["==", "id", 1]]]


def test_replace_keeps_serial_and_ctime_for_the_optimistic_update() -> None:
    old = msgspec.structs.replace(add(), serial_no=4, ctime=1.0, mtime=2.0)
    new = add(previous=old, priority=9, watermark=12)
    assert (new.serial_no, new.ctime, new.mtime) == (4, 1.0, 2.0)
    assert (new.priority, new.watermark) == (9, 12)


def test_filter_row_unknown_field() -> None:
    with pytest.raises(InvalidParams, match="'serial'"):
        filter_row(add(), ["uuid", "serial"])


@pytest.mark.parametrize(
    ("text", "wire"),
    [
        ("ACCEPT", "ACCEPT"),
        ("PAUSE", "PAUSE"),
        ("REJECT", "REJECT"),
        ("CONTINUE", "CONTINUE"),
        ("RATE_LIMIT 10", ["RATE_LIMIT", 10]),
        (" RATE_LIMIT   3 ", ["RATE_LIMIT", 3]),
    ],
)
def test_action_text_round_trip(text: str, wire: Any) -> None:
    assert parse_action_text(text) == wire
    assert validate_action(wire) == wire
    assert parse_action_text(action_text(wire)) == wire


@pytest.mark.parametrize("text", ["accept", "RATE_LIMIT", "RATE_LIMIT 0", "RATE_LIMIT -1", ""])
def test_action_text_errors(text: str) -> None:
    with pytest.raises(FilterError):
        parse_action_text(text)


# -- order ------------------------------------------------------------------------------------


def test_order_is_priority_then_watermark_then_uuid() -> None:
    rules = [
        rule(3, [], "REJECT", priority=1, watermark=0),
        rule(2, [], "PAUSE", priority=0, watermark=5),
        rule(9, [], "ACCEPT", priority=0, watermark=4),
        rule(1, [], ["RATE_LIMIT", 1], priority=0, watermark=5),
    ]
    chain = FilterChain(rules)
    assert [r.uuid for r in chain.rules] == [uid(9), uid(1), uid(2), uid(3)]
    assert [order_key(r) for r in chain.rules] == sorted(order_key(r) for r in rules)
    assert chain.verdict(job(1)) == Verdict("ACCEPT", uid(9))


def test_priority_beats_uuid_and_watermark() -> None:
    a = rule(1, [], "REJECT", priority=2, watermark=0)
    b = rule(9, [], "ACCEPT", priority=1, watermark=100)
    assert applying_verdict([a, b], job(1)) == Verdict("ACCEPT", uid(9))


def test_verdict_kinds() -> None:
    for action, verdict in [
        ("ACCEPT", Verdict("ACCEPT", uid(1))),
        ("PAUSE", Verdict("PAUSE", uid(1))),
        ("REJECT", Verdict("REJECT", uid(1))),
        (["RATE_LIMIT", 4], Verdict("RATE_LIMIT", uid(1), 4)),
        ("CONTINUE", None),
    ]:
        chain = FilterChain([rule(1, [], action)])
        assert chain.verdict(job(1)) == verdict
        expected_rule = None if verdict is None else chain.rules[0]
        assert applying_rule(chain, job(1)) == expected_rule


# -- the chain on stored rules ----------------------------------------------------------------


def test_chain_takes_stored_dicts_and_survives_bad_ones() -> None:
    good = rule_to_wire(rule(1, [["opcode", ["==", "OP_ID", "OP_CLUSTER_RENAME"]]], "PAUSE"))
    stored: list[Any] = [
        {"uuid": uid(2), "priority": 0},  # missing fields
        {**good, "uuid": uid(3), "action": "DROP", "priority": 0},
        {**good, "uuid": uid(4), "predicates": [["nope", None]]},
        {**good, "uuid": uid(5), "predicates": [["jobid", ["=~", "id", "("]]]},
        {**good, "uuid": uid(6), "predicates": "all"},
        good,
    ]
    chain = FilterChain(stored)
    assert set(chain.errors) == {uid(2), uid(3), uid(4), uid(5), uid(6)}
    assert chain.verdict(job(1)) == Verdict("PAUSE", uid(1))
    assert verdict_linear(chain, job(1)) == Verdict("PAUSE", uid(1))
    assert len(chain) == 4  # the two undecodable ones are not rules at all


def test_chain_accepts_structs_and_negative_stored_priorities() -> None:
    class Other(msgspec.Struct):
        uuid: str
        priority: int
        watermark: int
        predicates: list[Any]
        action: Any

    other = Other(uid(2), -5, 0, [], "REJECT")
    chain = FilterChain([rule(1, [], "ACCEPT"), other])
    assert chain.verdict(job(1)) == Verdict("REJECT", uid(2))


def test_unchanged_rules_are_not_compiled_again() -> None:
    a = rule(1, [["jobid", ["==", "id", 1]]], "PAUSE")
    b = rule(2, [["opcode", ["==", "OP_ID", "X"]]], "REJECT")
    first = FilterChain([a, b])
    second = FilterChain([a, msgspec.structs.replace(b, priority=5)], previous=first)
    assert second.compiled[0] is first.compiled[0]
    assert second.compiled[1] is not first.compiled[1]
    assert second.verdict(job(1)) == Verdict("PAUSE", uid(1))


def test_rule_lookup_and_repr() -> None:
    chain = FilterChain([rule(1, [], "CONTINUE"), rule(2, [], "ACCEPT")])
    assert rule_of(chain, uid(2)) is chain.rules[1]
    assert rule_of(chain, uid(7)) is None
    assert "2 rules, 1 active" in repr(chain)


@pytest.mark.parametrize(
    "predicates",
    [
        [["opcode", ["==", "OP_ID", "A"]], ["opcode", ["==", "OP_ID", "B"]]],
        [["opcode", ["==", "name", "x"]], ["opcode", ["==", "name", "y"]]],
        [
            ["opcode", ["&", ["==", "OP_ID", "A"], ["==", "name", "x"]]],
            ["opcode", ["==", "OP_ID", "B"]],
        ],
        [["reason", ["==", "reason", "r1"]], ["reason", ["==", "reason", "r2"]]],
    ],
)
def test_predicates_may_be_satisfied_by_different_opcodes_or_entries(
    predicates: list[Any],
) -> None:
    """Each predicate looks for its own opcode / reason entry: a job whose first op
    satisfies one and whose second op satisfies the other matches (regression: the index
    once intersected the OP_IDs the predicates require)."""
    j = job(
        1,
        ops=[
            {"OP_ID": "A", "name": "x", "reason": [["s", "r1", 1]]},
            {"OP_ID": "B", "name": "y", "reason": [["s", "r2", 2]]},
        ],
    )
    chain = FilterChain([rule(1, predicates, "PAUSE")])
    assert chain.verdict(j) == Verdict("PAUSE", uid(1))
    assert verdict_linear(chain, j) == Verdict("PAUSE", uid(1))
    other = job(2, ops=[{"OP_ID": "A", "name": "x", "reason": [["s", "r1", 1]]}])
    assert chain.verdict(other) is None
