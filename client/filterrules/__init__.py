"""Filter rules as both daemons must agree on them (docs/contracts.md#filters): pure, no I/O.

- `expr`: the query-language expressions of predicates (parse and check);
- `actions`: the wire form of the five actions (named in client.vocabulary, re-exported
  here as ACTIONS) and the `RATE_LIMIT n` text;
- `rules`: the stored rule (`FilterRule`), every add-time check, the wire conversions.

luxid builds rules with `make_rule` (its `replace_filter`); wconfd calls
`check_filter_object(obj)` on `add_object`/`update_object` of kind `filter`, so a rule
written through either daemon is refused with the same FilterError.  The evaluator stays
in luxid (luxid.filters), the only daemon that judges jobs.
"""

from client.filterrules.actions import (
    WireAction,
    action_text,
    parse_action_text,
    validate_action,
)
from client.filterrules.expr import parse
from client.filterrules.rules import (
    FILTER_FIELDS,
    PREDICATE_NAMES,
    REASON_SOURCE,
    FilterRule,
    check_filter_object,
    filter_row,
    make_rule,
    order_key,
    rule_from_wire,
    rule_to_wire,
    validate_predicates,
    validate_priority,
    validate_reason_trail,
    validate_uuid,
    validate_watermark,
)
from client.vocabulary import FILTER_ACTIONS as ACTIONS

__all__ = [
    "ACTIONS",
    "FILTER_FIELDS",
    "PREDICATE_NAMES",
    "REASON_SOURCE",
    "FilterRule",
    "WireAction",
    "action_text",
    "check_filter_object",
    "filter_row",
    "make_rule",
    "order_key",
    "parse",
    "parse_action_text",
    "rule_from_wire",
    "rule_to_wire",
    "validate_action",
    "validate_predicates",
    "validate_priority",
    "validate_reason_trail",
    "validate_uuid",
    "validate_watermark",
]
