"""Filter rules compiled to closures, with the facts the chain's index needs (pure).

`compile_rule(rule)` turns a stored rule (client.filterrules.FilterRule) into a
`CompiledRule`: one closure per predicate that is not constantly true, the rule's verdict
(None for CONTINUE, which never applies), and necessary conditions a job must meet to
match (an OP_ID, a parameter value, a reason text or source, a job-id range, a regex) that
luxid.filters.chain indexes rules by.  A stored rule that does not compile never matches;
`error` says why (a bad rule in the configuration must not stop the queue).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeAlias

from client.errors import FilterError
from client.filterrules import FilterRule, WireAction, validate_action
from luxid.filters import necessary, query
from luxid.filters.job import COMMON_PARAMS, FilterJob
from luxid.filters.verdict import Verdict

JobTest: TypeAlias = Callable[[FilterJob], bool]


def _jobid_test(expr: query.Expr, watermark: int) -> JobTest | bool:
    c = query.compile_jobid_tri(expr, watermark)
    if not callable(c):
        return c is True
    f = c
    return lambda job: f(job.id) is True


def _opcode_test(op_test: Callable[[Mapping[str, Any]], bool]) -> JobTest:
    def test(job: FilterJob) -> bool:
        for op in job.ops:  # noqa: SIM110 - a loop is faster than any() over a generator
            if op_test(op):
                return True
        return False

    return test


def _reason_test(expr: query.Expr) -> JobTest | bool:
    c = query.compile_reason_tri(expr)
    if not callable(c):
        if c is True:
            return lambda job: bool(job.reasons)
        return False
    f = c

    def test(job: FilterJob) -> bool:
        for entry in job.reasons:  # noqa: SIM110 - faster than any() over a generator
            if f(entry) is True:
                return True
        return False

    return test


def all_of(tests: Sequence[JobTest]) -> JobTest | None:
    """The conjunction of tests; None when there is nothing to test."""
    if not tests:
        return None
    if len(tests) == 1:
        return tests[0]
    if len(tests) == 2:
        a, b = tests
        return lambda job: a(job) and b(job)
    ts = tuple(tests)
    return lambda job: all(t(job) for t in ts)


class CompiledRule:
    """A rule compiled to closures plus what the chain's index needs to know about it.

    - `verdict`: what applying it means (None for CONTINUE: it never applies);
    - `never`: it can match no job (a constant-false predicate, or a stored rule that does
      not compile: `error` says why);
    - `tests`: one closure per predicate that is not constantly true; `matches(job)`;
    - index facts, each a *necessary* condition for a match: `value_guard` (the job must
      have one of these `("p", param, value)` / `("r", reason text)` / `("s", source)` keys),
      `opid_guard` (one of these OP_IDs), `opset_tests` (opcode predicates on OP_ID alone,
      decided by the job's OP_ID set; `residual` is the other tests), `id_range`, and
      `patterns` (one of these regexes must match a reason text / source);
    - `proj_all` / `proj_residual`: the top-level opcode fields that `tests` / `residual`
      depend on, when they depend on nothing but those (memoisable by their values).
    """

    __slots__ = (
        "alternation",
        "error",
        "id_range",
        "never",
        "opid_guard",
        "opset_tests",
        "patterns",
        "proj_all",
        "proj_residual",
        "residual",
        "rule",
        "tests",
        "value_guard",
        "verdict",
    )

    def __init__(self, rule: FilterRule) -> None:
        self.rule = rule
        self.verdict: Verdict | None = None
        self.never = False
        self.error: str | None = None
        self.tests: tuple[JobTest, ...] = ()
        self.opset_tests: tuple[Callable[[Mapping[str, Any]], bool], ...] = ()
        self.residual: JobTest | None = None
        self.value_guard: frozenset[tuple[str, ...]] | None = None
        self.opid_guard: frozenset[str] | None = None
        self.id_range: tuple[int, int] | None = None
        self.patterns: tuple[str, tuple[str, ...]] | None = None  # (field, patterns)
        self.alternation: str | None = None  # the patterns as one combinable alternative
        # The opcode fields `tests` / `residual` read, when they read nothing else.
        self.proj_all: tuple[str, ...] | None = None
        self.proj_residual: tuple[str, ...] | None = None

    @property
    def unconditional(self) -> bool:
        """Matches every job: no predicate left to test."""
        return not self.never and not self.tests

    def matches(self, job: FilterJob) -> bool:
        """Whether all predicates of the rule are true for the job."""
        if self.never:
            return False
        return all(t(job) for t in self.tests)


def _verdict_of(action: WireAction, uuid: str) -> Verdict | None:
    if isinstance(action, list):
        return Verdict("RATE_LIMIT", uuid, int(action[1]))
    if action == "CONTINUE":
        return None
    if action == "ACCEPT":
        return Verdict("ACCEPT", uuid)
    if action == "PAUSE":
        return Verdict("PAUSE", uuid)
    return Verdict("REJECT", uuid)


def compile_rule(rule: FilterRule) -> CompiledRule:
    """Compile a rule once (it passed the add-time checks when it was written).  A stored
    rule that does not compile is `never` matching, with the reason in `error`."""
    cr = CompiledRule(rule)
    try:
        cr.verdict = _verdict_of(validate_action(rule.action), rule.uuid)
        _compile_predicates(cr, rule)
    except FilterError as exc:
        cr.never, cr.error, cr.tests = True, exc.message, ()
    return cr


def _smaller(a: frozenset[Any] | None, b: frozenset[Any] | None) -> frozenset[Any] | None:
    """The more selective of two alternative necessary conditions."""
    if a is None:
        return b
    if b is None:
        return a
    return a if len(a) <= len(b) else b


def _compile_predicates(cr: CompiledRule, rule: FilterRule) -> None:
    tests: list[JobTest] = []
    opset_tests: list[Callable[[Mapping[str, Any]], bool]] = []
    residual: list[JobTest] = []
    value_guard: frozenset[tuple[str, ...]] | None = None
    # Fields read by the tests / by the residual tests; None once a test reads anything else.
    proj_all: set[str] | None = set()
    proj_res: set[str] | None = set()
    if not isinstance(rule.predicates, list | tuple):
        raise FilterError("predicates: not a list")
    for i, pred in enumerate(rule.predicates):
        if not isinstance(pred, list | tuple) or len(pred) != 2:
            raise FilterError(f"predicates[{i}]: must be [name, expression]")
        name, raw = pred
        expr = query.parse(raw)
        test: JobTest | bool
        if name == "jobid":
            test = _jobid_test(expr, rule.watermark)
            iv = necessary.id_interval(expr, rule.watermark)
            if iv is not None:
                old = cr.id_range
                cr.id_range = iv if old is None else (max(old[0], iv[0]), min(old[1], iv[1]))
        elif name == "opcode":
            fields = query.fields_of(expr)
            if any(f.split(".")[0] in COMMON_PARAMS for f in fields):
                test = False  # the common params are not fields of the opcode
            else:
                op_test = query.compile_opcode(expr, COMMON_PARAMS)
                test = _opcode_test(op_test)
                # Each opcode predicate may be satisfied by a different opcode: its guard is
                # necessary on its own, so keep one of them (never their intersection).
                cr.opid_guard = _smaller(cr.opid_guard, necessary.required_values(expr, "OP_ID"))
                for f in sorted(fields - {"OP_ID"}):
                    vals = necessary.required_values(expr, f) if "." not in f else None
                    if vals is not None:
                        value_guard = _smaller(value_guard, frozenset(("p", f, v) for v in vals))
                top = None if any("." in f for f in fields) else fields
                proj_all = None if proj_all is None or top is None else proj_all | top
                if fields == {"OP_ID"}:
                    opset_tests.append(op_test)
                    tests.append(test)
                    continue
                proj_res = None if proj_res is None or top is None else proj_res | top
        elif name == "reason":
            test = _reason_test(expr)
            for field, tag in (("reason", "r"), ("source", "s")):
                vals = necessary.required_values(expr, field)
                if vals is not None:
                    value_guard = _smaller(value_guard, frozenset((tag, v) for v in vals))
                pats = necessary.required_patterns(expr, field)
                if pats is not None and cr.patterns is None:
                    cr.patterns = (field, pats)
        else:
            raise FilterError(f"predicates[{i}]: unknown predicate {name!r}")
        if name != "opcode" and test is not True:
            proj_all = proj_res = None
        if test is True:
            continue
        if test is False:
            cr.never = True
            continue
        tests.append(test)
        residual.append(test)
    cr.value_guard = value_guard
    if cr.id_range is not None and cr.id_range[0] > cr.id_range[1]:
        cr.never = True
    for guard in (cr.opid_guard, cr.value_guard):
        if guard is not None and not guard:
            cr.never = True
    if cr.never:
        tests, opset_tests, residual = [], [], []
    cr.tests, cr.opset_tests, cr.residual = tuple(tests), tuple(opset_tests), all_of(residual)
    if cr.patterns is not None:
        parts = [necessary.combinable(p) for p in cr.patterns[1]]
        if parts and all(p is not None for p in parts):
            cr.alternation = "|".join(p for p in parts if p is not None)
    if proj_all and tests:
        cr.proj_all = tuple(sorted(proj_all))
    if proj_res and residual:
        cr.proj_residual = tuple(sorted(proj_res))
