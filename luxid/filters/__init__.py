"""The pure filter core of luxid (docs/contracts.md#filters): the evaluator and rate limits.

No sockets, files, clocks or processes.  The rules themselves (shape, add-time checks,
actions, the expression parser) are client.filterrules, shared with wconfd; re-exported
here.  Modules: `query` (expressions compiled to closures), `compile` (a rule compiled),
`chain` (the indexed evaluator), `job` (a job as the filters see it), `ratelimit`, `verdict`,
`job_index` (the jobs a rule can reach), `delta` (verdicts carried over a rule change),
`bulk` (many jobs judged at once, rule by rule).  How the rest of luxid uses it:

replace_filter(uuid, priority, predicates, action, reason)
    `rule = make_rule(uuid or str(uuid4()), priority, predicates, action, reason,
    watermark=<highest job id allocated>, now_ns=<now>, previous=<stored rule or None>)`
    raises FilterError naming the bad part; store `rule_to_wire(rule)` in wconfd's `filters`
    (add_object, or update_object: `previous` carries the serial_no it checks).
    The CLI's `--action "RATE_LIMIT n"` goes through `parse_action_text`.
query_filters(uuids, fields)
    `filter_row(rule, fields)` per rule (InvalidParams for an unknown field).
On every filter-set change (wait_config_change)
    `chain = FilterChain(config["filters"].values(), previous=chain)`; stored rules that do
    not decode or compile never apply and are reported in `chain.errors`.
Per job, once (at submit or load)
    `fjob = FilterJob(job.id, [op.input for op in job.ops])`; keep it with the job.
Submit
    `v = chain.verdict(fjob)`; REJECT → store the job `canceled` with result
    `rejected_result(v.rule_uuid)` and still return its id.
A scheduling pass (queued jobs in (priority, id) order, dependencies satisfied)
    `adm = Admission.from_running((chain.verdict(r), r.buckets) for r in running)` where
    running = every job with a process (waiting/running/canceling) or being started;
    then per queued job: `v = chain.verdict(fjob)`; REJECT → cancel it; otherwise
    `reason = adm.try_start(v, fjob.buckets)`: None → start it (stop at max_running_jobs;
    those left get "max running jobs reached"), else `reason` is its pending_reason
    ("paused by filter <uuid>", "rate-limit bucket <key> full", "rate-limited by filter
    <uuid>").  Running jobs: `chain.verdict(r)` PAUSE → pause at the next opcode boundary;
    REJECT never touches a running job.
Verdicts are a pure function of (rules, job); `chain.verdict` memoises internally, and
luxid.active_filters keeps them per job id until the rules change (a job's filter inputs
never change), then re-judges only the jobs the change can concern (`delta`, `job_index`),
or all of them at once (`bulk`).
"""

from client.filterrules import (
    ACTIONS,
    FILTER_FIELDS,
    PREDICATE_NAMES,
    FilterRule,
    action_text,
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
from luxid.filters.chain import FilterChain
from luxid.filters.compile import CompiledRule, compile_rule
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
from luxid.filters.verdict import Verdict

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
