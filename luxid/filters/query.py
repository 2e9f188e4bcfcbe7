"""Ganeti's query-language filter expressions compiled to closures (Query/Filter.hs), pure.

The syntax tree and its parser are client.filterrules.expr (shared with wconfd's checks);
this module compiles parsed expressions for luxid's evaluator (their necessary
conditions, for the rule index, are luxid.filters.necessary).

Wire form: `null` (true) or `[op, ...]` with the operators

    "&" f...     "|" f...     "!" f     "?" field
    "==" / "=" / "!=" / "<" / ">" / "<=" / ">="  field value
    "=~" field regex      "=[]" field value

Values are strings or integers; regexes are Python `re`, searched (not anchored) and
compiled once at parse time.  `!=` is `!(==)` and `=` is `==`, as in Ganeti.

Evaluation is three-valued, like Ganeti's Maybe/ErrorResult monads: a leaf is True, False
or *invalid* (None).  `&` and `|` look at their children left to right and stop at the first
child that is not True (resp. not False), so an invalid leaf that is never reached is harmless
but a reached one makes the whole expression invalid, even under `!`.  Invalid at the top
means false.

Three evaluation contexts, one per filter predicate (Ganeti's Filtering.hs):

- `compile_jobid(expr, watermark)`: the only field is `id`; values are integers or the
  string `"watermark"`.  Only comparisons are valid (Ganeti's `evaluateFilterComparator`).
- `compile_opcode(expr)`: fields are dotted paths into the opcode dict; every field named
  anywhere must exist or the opcode does not match; comparisons use the JSON order
  null < bool < number < string < array < object (never invalid); `?` needs a bool,
  `=~` a string, `=[]` a list of values of the value's type.
- `compile_reason(expr)`: one reason-trail entry `(source, reason, timestamp)`; comparisons
  follow Ganeti's FilterValue order (every string < every number).  **Beyond Ganeti**: `=~`
  on `source`/`reason` works (Ganeti evaluates every regex on reasons as false, which breaks
  the seed design's own "maintenance pink bunny" example); `?`, `=[]` and `=~` on
  `timestamp` are invalid.

Each `compile_*` returns a plain closure (constant-folded, no AST walk at evaluation time):
that is what keeps a scheduling pass over 10,000 jobs and 1,000 rules cheap.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, TypeAlias

from client.filterrules.expr import (
    COMPARISONS,
    OPERATORS,
    REASON_FIELDS,
    And,
    Compare,
    Contains,
    Empty,
    Expr,
    Not,
    Or,
    Regex,
    Truth,
    Value,
    fields_of,
    leaves_of,
    parse,
    walk,
)

__all__ = [
    "COMPARISONS", "OPERATORS", "REASON_FIELDS", "And", "Compare", "Contains", "Empty",
    "Expr", "Not", "Or", "Regex", "Truth", "Value", "fields_of", "leaves_of",
    "parse", "walk",
]  # fmt: skip

# A three-valued result: True, False, or None for "invalid".
Tri: TypeAlias = bool | None

# ---------------------------------------------------------------------------------------------
# Compilation to closures.  A compiled node is either a constant (True / False / None) or a
# callable returning one of them; constants are folded into their parents.

Compiled: TypeAlias = "Callable[[Any], Tri] | bool | None"
Leaf: TypeAlias = Callable[[Truth | Compare | Regex | Contains], Compiled]


def _const(value: Tri) -> Callable[[Any], Tri]:
    def const(_x: Any) -> Tri:
        return value

    return const


def _fn(c: Compiled) -> Callable[[Any], Tri]:
    return c if callable(c) else _const(c)


def _compile_tree(expr: Expr, leaf: Leaf) -> Compiled:
    """Build the closure for `expr`, with `leaf` compiling the field operators."""
    if isinstance(expr, Empty):
        return True
    if isinstance(expr, Not):
        c = _compile_tree(expr.child, leaf)
        if not callable(c):
            return None if c is None else not c
        f = c

        def not_(x: Any) -> Tri:
            r = f(x)
            return None if r is None else not r

        return not_
    if isinstance(expr, And | Or):
        # `&` passes on True and stops at anything else; `|` passes on False.
        passing = isinstance(expr, And)
        funcs: list[Callable[[Any], Tri]] = []
        tail: Tri = passing  # the result when every child passes
        for child in expr.children:
            c = _compile_tree(child, leaf)
            if callable(c):
                funcs.append(c)
            elif c is passing:
                continue
            else:
                tail = c  # a constant stop: later children are never reached
                break
        return _chain(funcs, passing, tail)
    return leaf(expr)


def _chain(funcs: list[Callable[[Any], Tri]], passing: bool, tail: Tri) -> Compiled:
    """`&` (passing=True) or `|` (passing=False) over funcs, then the constant tail."""
    if not funcs:
        return tail
    if len(funcs) == 1 and tail is passing:
        return funcs[0]
    if len(funcs) == 2 and tail is passing:
        f, g = funcs

        def two(x: Any) -> Tri:
            r = f(x)
            return g(x) if r is passing else r

        return two
    fs = tuple(funcs)

    def many(x: Any) -> Tri:
        for f in fs:
            r = f(x)
            if r is not passing:
                return r
        return tail

    return many


def _cmp_fun(op: str) -> Callable[[int], bool]:
    """Turn a three-way comparison result (-1, 0, 1) into the operator's truth value."""
    return {
        "==": lambda c: c == 0,
        "<": lambda c: c < 0,
        ">": lambda c: c > 0,
        "<=": lambda c: c <= 0,
        ">=": lambda c: c >= 0,
    }[op]


def _native(op: str, v: Any) -> Callable[[Any], bool]:
    """`x op v` for values of one comparable type."""
    if op == "==":
        return lambda x: x == v
    if op == "<":
        return lambda x: x < v
    if op == ">":
        return lambda x: x > v
    if op == "<=":
        return lambda x: x <= v
    return lambda x: x >= v


# -- jobid ------------------------------------------------------------------------------------


def compile_jobid(expr: Expr, watermark: int) -> Callable[[int], bool]:
    """The jobid predicate's test on a job id (Filtering.hs FPJobId)."""
    return _top(compile_jobid_tri(expr, watermark))


def compile_jobid_tri(expr: Expr, watermark: int) -> Compiled:
    """Three-valued jobid test, or a constant when it does not depend on the id."""

    def leaf(node: Truth | Compare | Regex | Contains) -> Compiled:
        if not isinstance(node, Compare) or node.field != "id":
            return None
        if isinstance(node.value, int):
            return _native(node.op, node.value)
        if node.value == "watermark":
            return _native(node.op, watermark)
        return None

    return _compile_tree(expr, leaf)


def _top(c: Compiled) -> Callable[[Any], bool]:
    """Collapse three-valued to two: only True is true."""
    if not callable(c):
        value = c is True
        return lambda _x: value
    f = c
    return lambda x: f(x) is True


# -- reason -----------------------------------------------------------------------------------

# FilterValue's derived order in Ganeti: QuotedString < NumericValue.
_FV_RANK_STR: Final = 0
_FV_RANK_NUM: Final = 1


def compile_reason_tri(expr: Expr) -> Compiled:
    """Three-valued test on one reason entry `(source, reason, timestamp)`."""

    def leaf(node: Truth | Compare | Regex | Contains) -> Compiled:
        idx = REASON_FIELDS.get(node.field)
        if idx is None:
            return None
        field_rank = _FV_RANK_NUM if idx == 2 else _FV_RANK_STR
        if isinstance(node, Compare):
            value_rank = _FV_RANK_STR if isinstance(node.value, str) else _FV_RANK_NUM
            if value_rank != field_rank:
                return _cmp_fun(node.op)(-1 if field_rank < value_rank else 1)
            test = _native(node.op, node.value)
            return lambda e: test(e[idx])
        if isinstance(node, Regex) and idx != 2:
            search = node.regex.search
            return lambda e: search(e[idx]) is not None
        return None  # ?, =[] and =~ on the timestamp: no such typed field

    return _compile_tree(expr, leaf)


def compile_reason(expr: Expr) -> Callable[[Sequence[Any]], bool]:
    """The reason predicate's test on one reason entry (the predicate is `any` of these)."""
    return _top(compile_reason_tri(expr))


# -- opcode (JSON objects) --------------------------------------------------------------------

_JSON_RANK: Final[dict[type, int]] = {
    type(None): 0,
    bool: 1,
    int: 2,
    float: 2,
    str: 3,
    list: 4,
    tuple: 4,
    dict: 5,
}


def json_rank(x: Any) -> int:
    """Position of a JSON value's type in Haskell's derived order of JSValue."""
    r = _JSON_RANK.get(type(x))
    if r is not None:
        return r
    if isinstance(x, bool):
        return 1
    if isinstance(x, int | float):
        return 2
    if isinstance(x, str):
        return 3
    if isinstance(x, Mapping):
        return 5
    return 4


def json_compare(x: Any, v: Value) -> int:
    """Three-way comparison of a JSON value with a filter value (type rank first)."""
    rx, rv = json_rank(x), (3 if isinstance(v, str) else 2)
    if rx != rv:
        return -1 if rx < rv else 1
    return (x > v) - (x < v)


def _getter(field: str) -> Callable[[Mapping[str, Any]], Any]:
    """Read a (dotted) field; only called after the existence check passed."""
    parts = field.split(".")
    if len(parts) == 1:
        return lambda op: op[field]

    def nested(op: Mapping[str, Any]) -> Any:
        cur: Any = op
        for p in parts:
            cur = cur[p]
        return cur

    return nested


def _has(op: Any, parts: Sequence[str]) -> bool:
    cur = op
    for p in parts:
        if not isinstance(cur, Mapping) or p not in cur:
            return False
        cur = cur[p]
    return True


def _is_integral(e: Any) -> bool:
    """An integer JSON number (Ganeti reads `[Integer]` lists for `=[]` with a number)."""
    if isinstance(e, bool):
        return False
    return isinstance(e, int) or (isinstance(e, float) and e.is_integer())


def _opcode_leaf(node: Truth | Compare | Regex | Contains) -> Compiled:
    get = _getter(node.field)
    if isinstance(node, Compare):
        v = node.value
        if node.op == "==":
            if isinstance(v, str):
                return lambda op: get(op) == v  # a str equals only a str
            return lambda op: (x := get(op)) == v and json_rank(x) == 2
        truth = _cmp_fun(node.op)
        return lambda op: truth(json_compare(get(op), v))
    if isinstance(node, Truth):

        def truth_leaf(op: Any) -> Tri:
            x = get(op)
            return x if isinstance(x, bool) else None

        return truth_leaf
    if isinstance(node, Regex):
        search = node.regex.search

        def regex_leaf(op: Any) -> Tri:
            x = get(op)
            return search(x) is not None if isinstance(x, str) else None

        return regex_leaf
    want = node.value

    def contains_leaf(op: Any) -> Tri:
        x = get(op)
        if not isinstance(x, list | tuple):
            return None
        if isinstance(want, str):
            if all(isinstance(e, str) for e in x):
                return want in x
            return None
        if all(_is_integral(e) for e in x):
            return any(e == want for e in x)
        return None

    return contains_leaf


def compile_opcode(
    expr: Expr, hidden: frozenset[str] = frozenset()
) -> Callable[[Mapping[str, Any]], bool]:
    """The opcode predicate's test on one opcode dict (the predicate is `any` of these).

    Fields are dotted paths; a path whose first component is in `hidden` (the common params)
    counts as missing.  Any missing field makes the opcode not match, as in Ganeti, where the
    fields are resolved before the expression is evaluated.
    """
    paths = [f.split(".") for f in sorted(fields_of(expr))]
    if any(p[0] in hidden for p in paths):
        return lambda _op: False
    tree = _top(_compile_tree(expr, _opcode_leaf))
    if not paths:
        return tree
    if all(len(p) == 1 for p in paths):
        keys = frozenset(p[0] for p in paths)
        if len(keys) == 1:
            (key,) = keys
            return lambda op: key in op and tree(op)
        return lambda op: op.keys() >= keys and tree(op)
    return lambda op: all(_has(op, p) for p in paths) and tree(op)


def evaluate_json(expr: Any, obj: Mapping[str, Any]) -> bool:
    """Evaluate a wire expression on a JSON object with the opcode rules (convenience)."""
    return compile_opcode(parse(expr))(obj)
