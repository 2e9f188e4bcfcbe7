"""The query language: parsing errors, three-valued evaluation, the rules for missing fields
and types in each predicate context, and the static analyses the index relies on."""

from __future__ import annotations

from typing import Any

import pytest

from client.errors import FilterError
from luxid.filters import COMMON_PARAMS, evaluate_json, necessary, parse
from luxid.filters import query as q

# -- parsing ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "message"),
    [
        (["~=", "a", "b"], "unknown operator '~='"),
        (["and", None], "unknown operator 'and'"),
        ("==", "expected null or"),
        ([], "expected null or"),
        ([1, "a"], "expected null or"),
        (["!"], "'!' takes one expression"),
        (["!", None, None], "'!' takes one expression"),
        (["?"], "'?' takes one field name"),
        (["==", "a"], "takes a field name and a value"),
        (["==", "a", 1, 2], "takes a field name and a value"),
        (["==", 3, 1], "field name 3 is not a string"),
        (["==", "a", 1.5], "value 1.5 is not a string or an integer"),
        (["==", "a", True], "value True is not a string or an integer"),
        (["==", "a", None], "is not a string or an integer"),
        (["==", "a", [1]], "is not a string or an integer"),
        (["=~", "a", "("], "does not compile"),
        (["=~", "a", 5], "regex 5 is not a string"),
        (["&", ["==", "a", 1], ["<>", "a", 1]], r"expression\[2\]: unknown operator"),
        (["|", ["!", ["=~", "a", "[z-a]"]]], r"expression\[1\]\[1\]\[2\]"),
    ],
)
def test_parse_errors_name_the_bad_part(expr: Any, message: str) -> None:
    with pytest.raises(FilterError, match=message) as info:
        parse(expr)
    assert info.value.data["type"] == "FilterError"
    assert info.value.data["part"].startswith("expression")


def test_integral_float_value_is_an_integer() -> None:
    assert parse(["==", "a", 2.0]) == q.Compare("==", "a", 2)


def test_fields_and_leaves() -> None:
    expr = parse(["&", ["==", "a", 1], ["!", ["?", "b"]], ["|", ["=~", "c.d", "x"]]])
    assert q.fields_of(expr) == {"a", "b", "c.d"}
    assert [leaf.field for leaf in q.leaves_of(expr)] == ["a", "b", "c.d"]


# -- three-valued logic -----------------------------------------------------------------------

# In a jobid expression, `=~` is always invalid: handy to test the logic.
BAD = ["=~", "id", "x"]
T = ["==", "id", 5]
F = ["==", "id", 6]


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (None, True),
        (["&"], True),
        (["|"], False),
        (["!", BAD], False),  # invalid stays invalid under !
        (["!", ["!", BAD]], False),
        (["&", F, BAD], False),  # & stops at F before reaching BAD
        (["&", T, BAD], False),  # reached: invalid
        (["!", ["&", F, BAD]], True),
        (["!", ["&", T, BAD]], False),
        (["|", T, BAD], True),  # | stops at T
        (["|", F, BAD], False),
        (["!", ["|", F, BAD]], False),
        (["|", BAD, T], False),  # invalid first: the whole is invalid
        (["!=", "id", 6], True),
        (["!=", "id", "nonsense"], False),  # !(invalid)
        (["&", T, ["|", F, T], ["!", F]], True),
    ],
)
def test_three_valued_logic(expr: Any, expected: bool) -> None:
    assert q.compile_jobid(parse(expr), 1)(5) is expected


# -- jobid ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "job_id", "expected"),
    [
        (["<", "id", "watermark"], 9, True),
        (["<", "id", "watermark"], 10, False),
        (["<=", "id", "watermark"], 10, True),
        ([">=", "id", "watermark"], 10, True),
        ([">", "id", "watermark"], 11, True),
        (["==", "id", "Watermark"], 10, False),  # only the exact string
        (["?", "id"], 10, False),
        (["=[]", "id", 10], 10, False),
        (["==", "ID", 10], 10, False),
    ],
)
def test_jobid(expr: Any, job_id: int, expected: bool) -> None:
    assert q.compile_jobid(parse(expr), 10)(job_id) is expected


# -- opcode (JSON objects) --------------------------------------------------------------------

OP = {
    "OP_ID": "OP_TEST_DELAY",
    "duration": 2.5,
    "repeat": 3,
    "fail": False,
    "on_nodes": ["n1", "n2"],
    "sizes": [1, 2.0],
    "mixed": ["a", 1],
    "none": None,
    "nested": {"a": {"b": "deep"}},
    "name": "web1",
}


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (["==", "OP_ID", "OP_TEST_DELAY"], True),
        (["=~", "OP_ID", "TEST"], True),  # searched, not anchored
        (["=~", "OP_ID", "^TEST"], False),
        (["=~", "name", "b1$"], True),
        (["==", "repeat", 3], True),
        (["==", "duration", 2], False),
        ([">", "duration", 2], True),
        (["<", "duration", 3], True),
        (["==", "fail", 0], False),  # a bool is not a number
        (["<", "fail", 0], True),  # null < bool < number < string < array < object
        (["<", "none", 0], True),
        ([">", "name", 1000], True),
        (["<", "name", "zzz"], True),
        ([">", "on_nodes", "zzz"], True),
        ([">", "nested", "zzz"], True),
        (["?", "fail"], False),
        (["!", ["?", "fail"]], True),
        (["?", "name"], False),  # not a bool: invalid
        (["!", ["?", "name"]], False),
        (["=~", "repeat", "3"], False),  # regex on a number: invalid
        (["!", ["=~", "repeat", "3"]], False),
        (["=[]", "on_nodes", "n2"], True),
        (["=[]", "on_nodes", "n3"], False),
        (["=[]", "sizes", 2], True),  # an integral float counts as an integer
        (["=[]", "sizes", "2"], False),  # a list of numbers cannot hold a string: invalid
        (["!", ["=[]", "sizes", "2"]], False),
        (["=[]", "mixed", "a"], False),  # mixed list: invalid
        (["=[]", "name", "w"], False),  # not a list: invalid
        (["==", "nested.a.b", "deep"], True),
        (["==", "nested.a", "deep"], False),
        (["==", "nested.x.b", "deep"], False),  # missing
        (["!", ["==", "missing", 1]], False),  # missing field: no match even under !
        (["|", ["==", "OP_ID", "OP_TEST_DELAY"], ["==", "missing", 1]], False),
        (["&", ["==", "repeat", 4], ["?", "name"]], False),
        (None, True),
    ],
)
def test_opcode_semantics(expr: Any, expected: bool) -> None:
    assert evaluate_json(expr, OP) is expected


def test_common_params_are_not_opcode_fields() -> None:
    op = {"OP_ID": "OP_TEST_DELAY", "priority": 0, "comment": "hi", "reason": []}
    for field in ("priority", "comment", "reason"):
        test = q.compile_opcode(parse(["!", ["==", field, "zzz"]]), COMMON_PARAMS)
        assert test(op) is False
    # without hiding, they are ordinary fields
    assert q.compile_opcode(parse(["==", "comment", "hi"]))(op) is True


# -- reason -----------------------------------------------------------------------------------

ENTRY = ("gnt:client", "maintenance pink bunny", 1234)


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (["==", "source", "gnt:client"], True),
        (["=~", "reason", "pink bunny"], True),  # beyond Ganeti: regexes on reasons work
        (["=~", "reason", "^pink"], False),
        (["=~", "source", "^gnt:"], True),
        (["=~", "timestamp", "12"], False),
        (["!", ["=~", "timestamp", "12"]], False),
        ([">", "timestamp", 1000], True),
        (["<=", "timestamp", 1234], True),
        # Ganeti's FilterValue order: every string is below every number
        (["==", "timestamp", "1234"], False),
        (["!=", "timestamp", "1234"], True),
        ([">", "timestamp", "zzz"], True),
        (["<", "reason", 0], True),
        (["?", "reason"], False),
        (["=[]", "reason", "x"], False),
        (["==", "other", "x"], False),
        (["!", ["==", "other", "x"]], False),
    ],
)
def test_reason_semantics(expr: Any, expected: bool) -> None:
    assert q.compile_reason(parse(expr))(ENTRY) is expected


# -- static analysis used by the index --------------------------------------------------------


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (["==", "OP_ID", "A"], {"A"}),
        (["=", "OP_ID", "A"], {"A"}),
        (["!=", "OP_ID", "A"], None),
        (["&", ["==", "OP_ID", "A"], ["==", "x", 1]], {"A"}),
        (["&", ["==", "OP_ID", "A"], ["==", "OP_ID", "B"]], set()),
        (["|", ["==", "OP_ID", "A"], ["==", "OP_ID", "B"]], {"A", "B"}),
        (["|", ["==", "OP_ID", "A"], ["==", "x", 1]], None),
        (["|"], set()),
        (["&"], None),
        (["==", "OP_ID", 5], None),
        (["=~", "OP_ID", "A"], None),
    ],
)
def test_required_values(expr: Any, expected: set[str] | None) -> None:
    got = necessary.required_values(parse(expr), "OP_ID")
    assert (None if got is None else set(got)) == expected


@pytest.mark.parametrize(
    ("expr", "expected"),
    [
        (["==", "id", 5], (5, 5)),
        ([">", "id", "watermark"], (11, necessary.ID_MAX)),
        (["<", "id", 5], (necessary.ID_MIN, 4)),
        (["&", [">=", "id", 3], ["<=", "id", 7]], (3, 7)),
        (["|", ["==", "id", 3], ["==", "id", 7]], (3, 7)),
        (["!", ["==", "id", 3]], None),
        (["==", "id", "x"], (necessary.ID_MAX, necessary.ID_MIN)),
        (["|", ["==", "id", 3], ["!", ["==", "id", 1]]], None),
    ],
)
def test_id_interval(expr: Any, expected: tuple[int, int] | None) -> None:
    assert necessary.id_interval(parse(expr), 10) == expected


@pytest.mark.parametrize(
    ("pattern", "ok"),
    [
        ("^a", True),
        ("a|b", True),
        ("(?i)abc", True),
        ("(?x) a b", True),
        (r"(a)\d", True),
        (r"(a)\1", False),
        ("(?P<n>a)(?P=n)", False),
        ("(a)?(?(1)b|c)", False),
    ],
)
def test_combinable(pattern: str, ok: bool) -> None:
    import re

    wrapped = necessary.combinable(pattern)
    assert (wrapped is not None) is ok
    if wrapped is not None:
        for text in ("a", "ABC", "ab", "a1", "xx", "aa"):
            both = re.compile(f"{wrapped}|(?:zzz)").search(text) is not None
            assert both is (re.search(pattern, text) is not None)
