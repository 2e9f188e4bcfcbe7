"""The pure filter core of luxid (SPEC §6.3): query language, rules, evaluator, rate limits.

No sockets, files, clocks or processes.  The scheduler builds one `FilterChain` per filter
set and one `FilterJob` per job, asks `chain.verdict(job)`, and uses `Admission` for
RATE_LIMIT and reason-bucket slots; luxid's replace_filter calls `make_rule`.
"""

from luxid.filters.job import COMMON_PARAMS, FilterJob
from luxid.filters.query import evaluate_json, parse
from luxid.filters.ratelimit import (
    Admission,
    bucket_full_reason,
    bucket_limit,
    bucket_of,
    buckets_of,
    count_buckets,
    count_rate_limit_rules,
    full_bucket,
    parse_reason_rate_limit,
    paused_reason,
    rate_limit_allows,
    rate_limited_reason,
    rejected_result,
)
from luxid.filters.rules import (
    ACTIONS,
    FILTER_FIELDS,
    PREDICATE_NAMES,
    CompiledRule,
    FilterChain,
    FilterRule,
    action_text,
    applying_verdict,
    compile_rule,
    filter_row,
    make_rule,
    order_key,
    parse_action_text,
    rule_from_wire,
    rule_to_wire,
    validate_action,
    validate_predicates,
    validate_priority,
    validate_reason_trail,
    validate_uuid,
)
from luxid.verdict import Verdict

__all__ = [
    "ACTIONS",
    "COMMON_PARAMS",
    "FILTER_FIELDS",
    "PREDICATE_NAMES",
    "Admission",
    "CompiledRule",
    "FilterChain",
    "FilterJob",
    "FilterRule",
    "Verdict",
    "action_text",
    "applying_verdict",
    "bucket_full_reason",
    "bucket_limit",
    "bucket_of",
    "buckets_of",
    "compile_rule",
    "count_buckets",
    "count_rate_limit_rules",
    "evaluate_json",
    "filter_row",
    "full_bucket",
    "make_rule",
    "order_key",
    "parse",
    "parse_action_text",
    "parse_reason_rate_limit",
    "paused_reason",
    "rate_limit_allows",
    "rate_limited_reason",
    "rejected_result",
    "rule_from_wire",
    "rule_to_wire",
    "validate_action",
    "validate_predicates",
    "validate_priority",
    "validate_reason_trail",
    "validate_uuid",
]
