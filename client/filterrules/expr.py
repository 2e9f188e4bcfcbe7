"""The filter rules' expression language (Ganeti's Query/Language.hs), parse and check.

Pure and shared: luxid compiles parsed expressions to closures (luxid.filters.query) and
wconfd checks rules written straight into its configuration with the same parser
(client.filterrules.check_filter_object), so both paths refuse the same rules.

Wire form: `null` (true) or `[op, ...]` with the operators

    "&" f...     "|" f...     "!" f     "?" field
    "==" / "=" / "!=" / "<" / ">" / "<=" / ">="  field value
    "=~" field regex      "=[]" field value

Values are strings or integers that fit in signed 64 bits, as every number a client sends
must (docs/contracts.md#numbers); regexes are Python `re`, searched (not anchored) and
compiled once at parse time.  `!=` is `!(==)` and `=` is `==`, as in Ganeti.  The semantics
(three-valued evaluation, the three predicate contexts) are described in
luxid.filters.query.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from client.errors import FilterError
from client.vocabulary import INT64_MAX, INT64_MIN

# The fields of one reason-trail entry `(source, reason, timestamp)`, by position.
REASON_FIELDS: Final[dict[str, int]] = {"source": 0, "reason": 1, "timestamp": 2}

# ---------------------------------------------------------------------------------------------
# Syntax tree

COMPARISONS: Final[frozenset[str]] = frozenset({"==", "<", ">", "<=", ">="})
OPERATORS: Final[tuple[str, ...]] = (
    "&", "|", "!", "?", "==", "=", "!=", "<", ">", "<=", ">=", "=~", "=[]",
)  # fmt: skip

Value: TypeAlias = str | int


@dataclass(frozen=True, slots=True)
class Empty:
    """`null`: always true."""


@dataclass(frozen=True, slots=True)
class And:
    """`["&", f...]`: all true (empty: true), left to right."""

    children: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Or:
    """`["|", f...]`: some true (empty: false), left to right."""

    children: tuple[Expr, ...]


@dataclass(frozen=True, slots=True)
class Not:
    """`["!", f]` (also the `!=` sugar); invalid stays invalid."""

    child: Expr


@dataclass(frozen=True, slots=True)
class Truth:
    """`["?", field]`: the field is the boolean true."""

    field: str


@dataclass(frozen=True, slots=True)
class Compare:
    """`[op, field, value]` for op in == < > <= >= (`=` is parsed as `==`)."""

    op: str
    field: str
    value: Value


@dataclass(frozen=True, slots=True)
class Regex:
    """`["=~", field, pattern]`: `re.search`, compiled at parse time."""

    field: str
    pattern: str
    regex: re.Pattern[str]


@dataclass(frozen=True, slots=True)
class Contains:
    """`["=[]", field, value]`: the (list) field contains the value."""

    field: str
    value: Value


Expr: TypeAlias = Empty | And | Or | Not | Truth | Compare | Regex | Contains


# ---------------------------------------------------------------------------------------------
# Parsing


def _where(path: tuple[int, ...]) -> str:
    """Human text for a position inside an expression, e.g. `expression[2][1]`."""
    return "expression" + "".join(f"[{i}]" for i in path)


def _bad(path: tuple[int, ...], text: str) -> FilterError:
    return FilterError(f"{_where(path)}: {text}", {"part": _where(path)})


def _parse_value(raw: Any, path: tuple[int, ...]) -> Value:
    """A filter value: a string or an integer (an integral JSON float counts, as in Ganeti)."""
    if isinstance(raw, str):
        return raw
    if isinstance(raw, bool):
        raise _bad(path, f"value {raw!r} is not a string or an integer")
    if isinstance(raw, float) and raw.is_integer():
        raw = int(raw)
    if isinstance(raw, int):
        if not INT64_MIN <= raw <= INT64_MAX:
            raise _bad(path, f"value {raw} does not fit in a signed 64-bit integer")
        return raw
    raise _bad(path, f"value {raw!r} is not a string or an integer")


def _parse_field(raw: Any, path: tuple[int, ...]) -> str:
    if not isinstance(raw, str):
        raise _bad(path, f"field name {raw!r} is not a string")
    return raw


def parse(expr: Any, _path: tuple[int, ...] = ()) -> Expr:
    """Parse and check the wire form of an expression; FilterError names the bad part.

    Checks what Ganeti's parser checks (operator names, arity, field and value types, the
    regex compiles); field *names* are the caller's business (they depend on the predicate).
    """
    path = _path
    if expr is None:
        return Empty()
    if not isinstance(expr, list | tuple) or not expr or not isinstance(expr[0], str):
        raise _bad(path, f"expected null or [operator, ...], got {expr!r}")
    op, args = expr[0], expr[1:]
    if op in ("&", "|"):
        kids = tuple(parse(a, (*path, i + 1)) for i, a in enumerate(args))
        return And(kids) if op == "&" else Or(kids)
    if op == "!":
        if len(args) != 1:
            raise _bad(path, f"'!' takes one expression, got {len(args)} arguments")
        return Not(parse(args[0], (*path, 1)))
    if op == "?":
        if len(args) != 1:
            raise _bad(path, f"'?' takes one field name, got {len(args)} arguments")
        return Truth(_parse_field(args[0], (*path, 1)))
    if op in COMPARISONS or op in ("=", "!=", "=~", "=[]"):
        if len(args) != 2:
            raise _bad(path, f"{op!r} takes a field name and a value, got {len(args)} arguments")
        field = _parse_field(args[0], (*path, 1))
        if op == "=~":
            if not isinstance(args[1], str):
                raise _bad((*path, 2), f"regex {args[1]!r} is not a string")
            try:
                compiled = re.compile(args[1])
            except re.error as exc:
                raise _bad((*path, 2), f"regex {args[1]!r} does not compile: {exc}") from None
            return Regex(field, args[1], compiled)
        value = _parse_value(args[1], (*path, 2))
        if op == "=[]":
            return Contains(field, value)
        if op == "!=":
            return Not(Compare("==", field, value))
        return Compare("==" if op == "=" else op, field, value)
    raise _bad(path, f"unknown operator {op!r} (expected one of {' '.join(OPERATORS)})")


def walk(expr: Expr) -> list[Expr]:
    """Every node of the tree, pre-order."""
    out: list[Expr] = [expr]
    if isinstance(expr, And | Or):
        for child in expr.children:
            out.extend(walk(child))
    elif isinstance(expr, Not):
        out.extend(walk(expr.child))
    return out


def fields_of(expr: Expr) -> set[str]:
    """The field names an expression mentions anywhere."""
    return {n.field for n in walk(expr) if isinstance(n, Truth | Compare | Regex | Contains)}


def leaves_of(expr: Expr) -> list[Truth | Compare | Regex | Contains]:
    """The leaves (operators on a field), pre-order."""
    return [n for n in walk(expr) if isinstance(n, Truth | Compare | Regex | Contains)]
