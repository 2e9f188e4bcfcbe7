"""Necessary conditions of a filter expression (luxid.filters.query's syntax), pure: what
a field must equal or match, and the interval a job id must fall in, for the expression to
be true.  Used by the rule index (luxid.filters.compile) to skip rules that cannot apply;
never by the semantics, which luxid.filters.query's closures decide alone."""

from __future__ import annotations

import re
from typing import Final

from client.filterrules.expr import And, Compare, Contains, Expr, Or, Regex, Truth
from client.vocabulary import INT64_MAX, INT64_MIN


def required_values(expr: Expr, field: str) -> frozenset[str] | None:
    """A set S such that the expression can only be true if `field` equals a member of S.

    None means "no such constraint found".  Sound in the three-valued logic: `&` is true only
    if every child is true, `|` only if some child is.
    """
    if isinstance(expr, Compare):
        if expr.op == "==" and expr.field == field and isinstance(expr.value, str):
            return frozenset((expr.value,))
        return None
    if isinstance(expr, And):
        found = [s for s in (required_values(c, field) for c in expr.children) if s is not None]
        if not found:
            return None
        out = found[0]
        for s in found[1:]:
            out = out & s
        return out
    if isinstance(expr, Or):
        sets = [required_values(c, field) for c in expr.children]
        if any(s is None for s in sets):
            return None
        return frozenset().union(*[s for s in sets if s is not None])
    return None


def required_patterns(expr: Expr, field: str) -> tuple[str, ...] | None:
    """Regexes one of which must match `field` for the expression to be true, or None."""
    if isinstance(expr, Regex):
        return (expr.pattern,) if expr.field == field else None
    if isinstance(expr, And):
        for child in expr.children:
            found = required_patterns(child, field)
            if found is not None:
                return found
        return None
    if isinstance(expr, Or) and expr.children:
        out: list[str] = []
        for child in expr.children:
            found = required_patterns(child, field)
            if found is None:
                return None
            out.extend(found)
        return tuple(out)
    return None


def combinable(pattern: str) -> str | None:
    """`pattern` as a group that can be one alternative of a bigger regex, or None.

    `search(A|B)` finds a match iff `search(A)` or `search(B)` does, so an alternation of many
    rules' regexes is a one-search prefilter for all of them.  A leading global flag group
    becomes a scoped one; patterns with back-references are left out (group numbers shift).
    """
    body = pattern
    m = re.match(r"\(\?([aiLmsux]+)\)", pattern)
    if m:
        body = f"(?{m.group(1)}:{pattern[m.end() :]})"
    wrapped = f"(?:{body})"
    try:
        compiled = re.compile(wrapped)
    except re.error:
        return None
    if compiled.groups and (_BACKREF.search(pattern) or "(?P" in pattern or "(?(" in pattern):
        return None  # back-references, named groups and conditionals depend on numbering
    return wrapped


_BACKREF: Final = re.compile(r"(?<!\\)(?:\\\\)*\\[1-9]")


# The ends of a jobid interval that no comparison bounds.  ID_MAX is one above INT64_MAX,
# the largest job id, as it has always been, so a rule such as `id > INT64_MAX` compiles
# as it did before these bounds came from client.vocabulary.
ID_MIN: Final = INT64_MIN
ID_MAX: Final = INT64_MAX + 1


def id_interval(expr: Expr, watermark: int) -> tuple[int, int] | None:
    """An inclusive interval [lo, hi] outside which a jobid expression cannot be true.

    None means unconstrained; lo > hi means never true.
    """
    if isinstance(expr, Compare):
        if expr.field != "id":
            return None
        if isinstance(expr.value, int):
            v = expr.value
        elif expr.value == "watermark":
            v = watermark
        else:
            return (ID_MAX, ID_MIN)  # invalid leaf: never true
        return {
            "==": (v, v),
            "<": (ID_MIN, v - 1),
            "<=": (ID_MIN, v),
            ">": (v + 1, ID_MAX),
            ">=": (v, ID_MAX),
        }[expr.op]
    if isinstance(expr, Truth | Regex | Contains):
        return (ID_MAX, ID_MIN)  # non-comparisons are invalid in jobid
    if isinstance(expr, And):
        found = [iv for iv in (id_interval(c, watermark) for c in expr.children) if iv]
        if not found:
            return None
        return (max(lo for lo, _ in found), min(hi for _, hi in found))
    if isinstance(expr, Or):
        ivs = [id_interval(c, watermark) for c in expr.children]
        if any(iv is None for iv in ivs):
            return None
        real = [iv for iv in ivs if iv is not None and iv[0] <= iv[1]]
        if not real:
            return (ID_MAX, ID_MIN)
        return (min(lo for lo, _ in real), max(hi for _, hi in real))
    return None
