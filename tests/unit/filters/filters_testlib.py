"""Helpers for the filter tests: Ganeti's test jobs, rules, a selection pass, and a reference
evaluator written straight from Ganeti's semantics (Filtering.hs, Query/Filter.hs) without
using luxid.filters.query, so that the compiled, indexed evaluator is checked against it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from luxid.filters import Admission, FilterChain, FilterJob, FilterRule, Verdict

COMMON = {"priority", "depends", "reason", "comment"}


def uid(n: int) -> str:
    """A valid rule uuid that sorts by n."""
    return f"00000000-0000-4000-8000-{n:012d}"


def job(
    n: int,
    reasons: Sequence[Sequence[Any]] = (("source1", "reason1", 1234),),
    ops: Sequence[dict[str, Any]] | None = None,
) -> FilterJob:
    """Ganeti's test job jN: one OP_CLUSTER_RENAME {name: cluster1} with reason
    [(source1, reason1, 1234)] (as in Ganeti's filter tests)."""
    if ops is None:
        ops = [{"OP_ID": "OP_CLUSTER_RENAME", "name": "cluster1"}]
    ops = [dict(op) for op in ops]
    for op in ops:
        op.setdefault("reason", [list(r) for r in reasons])
    return FilterJob(n, ops)


def rule(
    n: int,
    predicates: list[Any],
    action: Any,
    priority: int = 0,
    watermark: int = 1,
) -> FilterRule:
    """A stored rule, built without validation (the evaluator's lenient path)."""
    return FilterRule(
        uuid=uid(n), priority=priority, watermark=watermark, predicates=predicates, action=action
    )


def select(
    chain: FilterChain,
    queued: Iterable[FilterJob],
    running: Iterable[FilterJob] = (),
    max_running: int = 20,
) -> list[int]:
    """A scheduling pass as docs/contracts.md#scheduling-and-job-processes
    describe it, using Admission: REJECTed jobs are dropped (canceled), others start while their
    slots allow, in order."""
    running = list(running)
    adm = Admission.from_running((chain.verdict(j), j.buckets) for j in running)
    started: list[int] = []
    for j in queued:
        if len(running) + len(started) >= max_running:
            break
        v = chain.verdict(j)
        if v is not None and v.action == "REJECT":
            continue
        if adm.try_start(v, j.buckets) is None:
            started.append(j.id)
    return started


# ---------------------------------------------------------------------------------------------
# The reference evaluator

INVALID = "invalid"
MISSING = object()


def _tri(expr: Any, leaf: Any) -> Any:
    """Three-valued evaluation: True, False or INVALID; & and | stop at the first child
    that is not True / not False (Ganeti's allM / anyM in a Maybe/ErrorResult monad)."""
    if expr is None:
        return True
    op, args = expr[0], expr[1:]
    if op == "&":
        for a in args:
            r = _tri(a, leaf)
            if r is not True:
                return r
        return True
    if op == "|":
        for a in args:
            r = _tri(a, leaf)
            if r is not False:
                return r
        return False
    if op == "!":
        r = _tri(args[0], leaf)
        return r if r == INVALID else not r
    if op == "!=":
        r = leaf("==", args[0], args[1])
        return r if r == INVALID else not r
    if op == "=":
        op = "=="
    return leaf(op, *args)


def _cmp(op: str, a: Any, b: Any) -> bool:
    return {
        "==": a == b,
        "<": a < b,
        ">": a > b,
        "<=": a <= b,
        ">=": a >= b,
    }[op]


def _fields(expr: Any) -> list[str]:
    if expr is None:
        return []
    op, args = expr[0], expr[1:]
    if op in ("&", "|"):
        return [f for a in args for f in _fields(a)]
    if op == "!":
        return _fields(args[0])
    return [args[0]]


def _json_rank(x: Any) -> int:
    if x is None:
        return 0
    if isinstance(x, bool):
        return 1
    if isinstance(x, int | float):
        return 2
    if isinstance(x, str):
        return 3
    if isinstance(x, list):
        return 4
    return 5


def ref_jobid(expr: Any, job_id: int, watermark: int) -> bool:
    def leaf(op: str, field: str, value: Any = None) -> Any:
        if field != "id" or op not in ("==", "<", ">", "<=", ">="):
            return INVALID
        if isinstance(value, str):
            if value != "watermark":
                return INVALID
            value = watermark
        return _cmp(op, job_id, value)

    return _tri(expr, leaf) is True


def _get(op: dict[str, Any], field: str) -> Any:
    cur: Any = op
    for i, part in enumerate(field.split(".")):
        if i == 0 and part in COMMON:
            return MISSING
        if not isinstance(cur, dict) or part not in cur:
            return MISSING
        cur = cur[part]
    return cur


def ref_opcode_one(expr: Any, op: dict[str, Any]) -> bool:
    if any(_get(op, f) is MISSING for f in _fields(expr)):
        return False

    def leaf(o: str, field: str, value: Any = None) -> Any:
        x = _get(op, field)
        if o == "?":
            return x if isinstance(x, bool) else INVALID
        if o == "=~":
            return re.search(value, x) is not None if isinstance(x, str) else INVALID
        if o == "=[]":
            if not isinstance(x, list):
                return INVALID
            if isinstance(value, str):
                return value in x if all(isinstance(e, str) for e in x) else INVALID
            ok = all(
                not isinstance(e, bool) and isinstance(e, int | float) and float(e).is_integer()
                for e in x
            )
            return value in x if ok else INVALID
        rx, rv = _json_rank(x), _json_rank(value)
        if rx != rv:
            return _cmp(o, rx, rv)
        return _cmp(o, x, value)

    return _tri(expr, leaf) is True


def ref_reason_one(expr: Any, entry: Sequence[Any]) -> bool:
    def leaf(o: str, field: str, value: Any = None) -> Any:
        idx = {"source": 0, "reason": 1, "timestamp": 2}.get(field)
        if idx is None:
            return INVALID
        x = entry[idx]
        if o == "=~":
            return re.search(value, x) is not None if idx != 2 else INVALID
        if o not in ("==", "<", ">", "<=", ">="):
            return INVALID
        # Ganeti's FilterValue order: every QuotedString < every NumericValue
        kx, kv = (1 if idx == 2 else 0), (0 if isinstance(value, str) else 1)
        if kx != kv:
            return _cmp(o, kx, kv)
        return _cmp(o, x, value)

    return _tri(expr, leaf) is True


def ref_matches(r: FilterRule, j: FilterJob) -> bool:
    for name, expr in r.predicates:
        if name == "jobid":
            ok = ref_jobid(expr, j.id, r.watermark)
        elif name == "opcode":
            ok = any(ref_opcode_one(expr, dict(op)) for op in j.ops)
        else:
            ok = any(ref_reason_one(expr, e) for e in j.reasons)
        if not ok:
            return False
    return True


def ref_verdict(rules: Iterable[FilterRule], j: FilterJob) -> Verdict | None:
    """The applying rule's verdict, by definition: the first rule in (priority, watermark,
    uuid) order whose predicates all match and whose action is not CONTINUE."""
    for r in sorted(rules, key=lambda r: (r.priority, r.watermark, r.uuid)):
        if r.action == "CONTINUE" or not ref_matches(r, j):
            continue
        if isinstance(r.action, list):
            return Verdict("RATE_LIMIT", r.uuid, r.action[1])
        return Verdict(r.action, r.uuid)
    return None


# -- reference answers of a chain, by testing every rule in order (no index) ---------------


def verdicts(chain: FilterChain, jobs: Iterable[FilterJob]) -> list[Verdict | None]:
    """`chain.verdict` for each job, in order."""
    return [chain.verdict(j) for j in jobs]


def verdict_linear(chain: FilterChain, job: FilterJob) -> Verdict | None:
    """The chain's answer by testing every compiled rule in order: the index's reference."""
    for cr in chain.compiled:
        if cr.verdict is not None and cr.matches(job):
            return cr.verdict
    return None


def rule_of(chain: FilterChain, uuid: str) -> FilterRule | None:
    """The chain's rule with this uuid (the last in order, as the chain keeps it), or None."""
    return next((r for r in reversed(chain.rules) if r.uuid == uuid), None)


def applying_rule(chain: FilterChain, job: FilterJob) -> FilterRule | None:
    """The rule that applies to the job, or None."""
    v = chain.verdict(job)
    return None if v is None else rule_of(chain, v.rule_uuid)


def applying_verdict(rules: Iterable[Any], job: FilterJob) -> Verdict | None:
    """One-off evaluation through a fresh chain."""
    return FilterChain(rules).verdict(job)
