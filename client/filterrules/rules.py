"""Filter rules (docs/contracts.md#filters; Ganeti's design-optables): the stored shape
and every check that can be made when a rule is added or replaced, pure.

Both writers of rules use it: luxid's `replace_filter` (`make_rule`) and wconfd's
`add_object`/`update_object` of kind `filter` (`check_filter_object`), so a rule is refused
the same way whichever path writes it.  Evaluation is luxid's (luxid.filters).

Stored / wire shape (wconfd `filters`, `query_filters`, RAPI):

    {"uuid", "priority": int >= 0, "watermark": int, "predicates": [[name, expr]...],
     "action": "ACCEPT" | "PAUSE" | "REJECT" | "CONTINUE" | ["RATE_LIMIT", n],
     "reason_trail": [[source, text, timestamp_ns]...], "serial_no", "ctime", "mtime"}

Every integer must fit in signed 64 bits (docs/contracts.md#numbers).
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterable, Sequence
from typing import Any, Final

import msgspec

from client.errors import FilterError, InvalidParams
from client.filterrules.actions import validate_action
from client.filterrules.expr import REASON_FIELDS, Expr, leaves_of, parse
from client.vocabulary import INT64_MAX, INT64_MIN

PREDICATE_NAMES: Final[tuple[str, ...]] = ("jobid", "opcode", "reason")
FILTER_FIELDS: Final[tuple[str, ...]] = (
    "uuid", "watermark", "priority", "predicates", "action", "reason_trail",
)  # fmt: skip
UUID_RE: Final = re.compile(r"^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$")
# Ganeti appends ("luxid", "", now_ns) to a rule's reason trail when it is added or replaced.
REASON_SOURCE: Final = "luxid"


class FilterRule(msgspec.Struct, frozen=True, kw_only=True):
    """A filter rule as stored in the wconfd configuration (`filters[uuid]`)."""

    uuid: str
    priority: int
    watermark: int
    predicates: list[Any]
    action: str | list[Any]
    reason_trail: list[Any] = []
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0


def order_key(rule: FilterRule) -> tuple[int, int, str]:
    """The evaluation order of rules: ascending (priority, watermark, uuid)."""
    return (rule.priority, rule.watermark, rule.uuid)


# ---------------------------------------------------------------------------------------------
# Validation (add / replace time).  Every error is a FilterError whose message names the part.


def _err(part: str, text: str) -> FilterError:
    return FilterError(f"{part}: {text}", {"part": part})


def validate_uuid(uuid: Any) -> str:
    """A rule uuid must be a lowercase canonical UUID (Ganeti's "Unable to parse UUID")."""
    if not isinstance(uuid, str) or not UUID_RE.match(uuid):
        raise _err("uuid", f"unable to parse UUID {uuid!r}")
    return uuid


def _non_negative_int64(value: Any, part: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise _err(part, f"must be a non-negative integer, got {value!r}")
    if value > INT64_MAX:
        raise _err(part, f"{value} does not fit in a signed 64-bit integer")
    return value


def validate_priority(priority: Any) -> int:
    """Priorities are non-negative integers (lower = consulted first)."""
    return _non_negative_int64(priority, "priority")


def validate_watermark(watermark: Any) -> int:
    """A watermark is a job id: a non-negative integer."""
    return _non_negative_int64(watermark, "watermark")


def _check_fields(name: str, expr: Expr, part: str) -> None:
    """Field names that can be checked at add time: jobid has `id`, reason has three."""
    allowed: Iterable[str]
    if name == "jobid":
        allowed = ("id",)
    elif name == "reason":
        allowed = tuple(REASON_FIELDS)
    else:
        return  # opcode fields depend on the opcode: checked per opcode at evaluation
    for leaf in leaves_of(expr):
        if leaf.field not in allowed:
            raise _err(
                part,
                f"field {leaf.field!r} is not available in a {name} predicate "
                f"(only {', '.join(allowed)})",
            )


def validate_predicates(predicates: Any) -> list[Any]:
    """Check every `[name, expression]` predicate; returns a copy as stored."""
    if not isinstance(predicates, list | tuple):
        raise _err("predicates", f"must be a list of [name, expression], got {predicates!r}")
    for i, pred in enumerate(predicates):
        part = f"predicates[{i}]"
        if not isinstance(pred, list | tuple) or not pred:
            raise _err(part, f"must be [name, expression], got {pred!r}")
        name = pred[0]
        if name not in PREDICATE_NAMES:
            raise _err(
                part, f"unknown predicate {name!r} (expected one of {', '.join(PREDICATE_NAMES)})"
            )
        if len(pred) != 2:
            raise _err(part, f"{name} takes exactly one expression, got {len(pred) - 1} arguments")
        try:
            expr = parse(pred[1])
        except FilterError as exc:
            raise _err(f"{part} ({name})", exc.message) from None
        _check_fields(name, expr, f"{part} ({name})")
    return [list(copy.deepcopy(p)) for p in predicates]


def validate_reason_trail(trail: Any) -> list[list[Any]]:
    """A reason trail is a list of `[source, text, timestamp_ns]`."""
    if trail is None:
        return []
    if not isinstance(trail, list | tuple):
        raise _err("reason", f"must be a list of [source, text, timestamp], got {trail!r}")
    out: list[list[Any]] = []
    for i, entry in enumerate(trail):
        ok = (
            isinstance(entry, list | tuple)
            and len(entry) == 3
            and isinstance(entry[0], str)
            and isinstance(entry[1], str)
            and isinstance(entry[2], int)
            and not isinstance(entry[2], bool)
            and INT64_MIN <= entry[2] <= INT64_MAX
        )
        if not ok:
            raise _err(f"reason[{i}]", f"must be [source, text, timestamp_ns], got {entry!r}")
        out.append(list(entry))
    return out


def make_rule(
    uuid: str,
    priority: Any,
    predicates: Any,
    action: Any,
    reason_trail: Any,
    *,
    watermark: int,
    now_ns: int | None = None,
    previous: FilterRule | None = None,
) -> FilterRule:
    """Validate a replace_filter call and build the rule to store (FilterError if bad).

    `watermark` is the highest job id allocated now (recomputed on every replace).  With
    `now_ns`, `[REASON_SOURCE, "", now_ns]` is appended to the trail, as Ganeti does.
    `previous` (the stored rule of that uuid) keeps serial_no/ctime/mtime, which wconfd's
    optimistic update checks and bumps.
    """
    trail = validate_reason_trail(reason_trail)
    if now_ns is not None:
        trail.append([REASON_SOURCE, "", now_ns])
    rule = FilterRule(
        uuid=validate_uuid(uuid),
        priority=validate_priority(priority),
        watermark=validate_watermark(watermark),
        predicates=validate_predicates(predicates),
        action=validate_action(action),
        reason_trail=trail,
        serial_no=previous.serial_no if previous else 0,
        ctime=previous.ctime if previous else 0.0,
        mtime=previous.mtime if previous else 0.0,
    )
    return rule


def check_filter_object(obj: Any) -> None:
    """The add-time checks of docs/contracts.md#filters for a rule written straight into
    wconfd.

    `obj` is the filter object of `add_object`/`update_object(kind="filter")` as a dict;
    absent fields take wconfd's defaults (priority 0, watermark 0, no predicates, ACCEPT, an
    empty trail).  Raises FilterError naming the bad part, exactly as `replace_filter` would
    for the same rule; returns None if the rule is good.
    """
    if not isinstance(obj, dict):
        raise _err("filter", f"a filter rule is an object, got {obj!r}")
    if "uuid" in obj:
        validate_uuid(obj["uuid"])
    validate_priority(obj.get("priority", 0))
    validate_watermark(obj.get("watermark", 0))
    validate_predicates(obj.get("predicates", []))
    validate_action(obj.get("action", "ACCEPT"))
    validate_reason_trail(obj.get("reason_trail", []))


def rule_from_wire(obj: Any) -> FilterRule:
    """A FilterRule from its stored/wire form (dict or Struct); FilterError if malformed."""
    if isinstance(obj, FilterRule):
        return obj
    if isinstance(obj, msgspec.Struct):
        obj = msgspec.to_builtins(obj)
    try:
        return msgspec.convert(obj, FilterRule, strict=False)
    except msgspec.ValidationError as exc:
        raise FilterError(f"malformed filter rule: {exc}") from None


def rule_to_wire(rule: FilterRule) -> dict[str, Any]:
    """The stored/wire dict of a rule."""
    out: dict[str, Any] = msgspec.to_builtins(rule)
    return out


def filter_row(rule: FilterRule, fields: Sequence[str] | None = None) -> list[Any]:
    """One `query_filters` row: the values of `fields` (default all of FILTER_FIELDS)."""
    names = FILTER_FIELDS if fields is None else fields
    row: list[Any] = []
    for name in names:
        if name not in FILTER_FIELDS:
            raise InvalidParams(
                f"fields: unknown filter field {name!r} (known: {' '.join(FILTER_FIELDS)})"
            )
        row.append(copy.deepcopy(getattr(rule, name)))
    return row
