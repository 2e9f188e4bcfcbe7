"""Filter rules (SPEC §6.3, seed 001, ganeti-luxid.md §3): the stored shape, validation when
a rule is added or replaced, the order, and the evaluator that finds a job's applying rule.

A rule *applies* to a job if it is the first, in `(priority, watermark, uuid)` order, whose
predicates all match the job (no predicates: always) and whose action is not CONTINUE.
CONTINUE rules therefore never change anything; the evaluator drops them.

Stored / wire shape (wconfd `filters`, `query_filters`, RAPI):

    {"uuid", "priority": int >= 0, "watermark": int, "predicates": [[name, expr]...],
     "action": "ACCEPT" | "PAUSE" | "REJECT" | "CONTINUE" | ["RATE_LIMIT", n],
     "reason_trail": [[source, text, timestamp_ns]...], "serial_no", "ctime", "mtime"}

`FilterChain` is the evaluator: built once per filter-set change (it compiles every rule to
closures and indexes the rules by what they require of a job: an OP_ID, a reason text or
source, an id range), then `chain.verdict(job)` per job.
"""

from __future__ import annotations

import copy
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final, TypeAlias

import msgspec

from client.errors import FilterError, InvalidParams
from luxid.filters import query
from luxid.filters.job import COMMON_PARAMS, FilterJob
from luxid.verdict import Verdict

ACTIONS: Final[tuple[str, ...]] = ("ACCEPT", "PAUSE", "REJECT", "CONTINUE", "RATE_LIMIT")
PREDICATE_NAMES: Final[tuple[str, ...]] = ("jobid", "opcode", "reason")
FILTER_FIELDS: Final[tuple[str, ...]] = (
    "uuid", "watermark", "priority", "predicates", "action", "reason_trail",
)  # fmt: skip
UUID_RE: Final = re.compile(r"^[a-f0-9]{8}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{4}-[a-f0-9]{12}$")
# Ganeti appends ("luxid", "", now_ns) to a rule's reason trail when it is added or replaced.
REASON_SOURCE: Final = "luxid"
_RATE_LIMIT_TEXT: Final = re.compile(r"^RATE_LIMIT\s+(\d+)$")

WireAction: TypeAlias = str | list[Any]


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


def validate_priority(priority: Any) -> int:
    """Priorities are non-negative integers (lower = consulted first)."""
    if isinstance(priority, bool) or not isinstance(priority, int):
        raise _err("priority", f"must be a non-negative integer, got {priority!r}")
    if priority < 0:
        raise _err("priority", f"must be a non-negative integer, got {priority}")
    return priority


def parse_action_text(text: str) -> WireAction:
    """The CLI form: `ACCEPT` … `CONTINUE` or `RATE_LIMIT n` → the wire form."""
    stripped = text.strip()
    m = _RATE_LIMIT_TEXT.match(stripped)
    if m:
        return validate_action(["RATE_LIMIT", int(m.group(1))])
    return validate_action(stripped)


def validate_action(action: Any) -> WireAction:
    """The normalized wire action; accepts the five (case-sensitive) and `"RATE_LIMIT n"` text."""
    if isinstance(action, str):
        if action in ACTIONS and action != "RATE_LIMIT":
            return action
        if action.startswith("RATE_LIMIT"):
            m = _RATE_LIMIT_TEXT.match(action)
            if m is None:
                raise _err("action", "RATE_LIMIT argument must be a positive integer")
            return validate_action(["RATE_LIMIT", int(m.group(1))])
    elif isinstance(action, list | tuple) and action and action[0] == "RATE_LIMIT":
        n = action[1] if len(action) == 2 else None
        if isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            raise _err("action", "RATE_LIMIT argument must be a positive integer")
        return ["RATE_LIMIT", n]
    raise _err(
        "action",
        f'{action!r} is not one of ACCEPT, PAUSE, REJECT, CONTINUE, ["RATE_LIMIT", n]',
    )


def action_text(action: WireAction) -> str:
    """The human/CLI form of a wire action: `"RATE_LIMIT 10"` for `["RATE_LIMIT", 10]`."""
    if isinstance(action, list):
        return " ".join(str(a) for a in action)
    return action


def _check_fields(name: str, expr: query.Expr, part: str) -> None:
    """Field names that can be checked at add time: jobid has `id`, reason has three."""
    allowed: Iterable[str]
    if name == "jobid":
        allowed = ("id",)
    elif name == "reason":
        allowed = tuple(query.REASON_FIELDS)
    else:
        return  # opcode fields depend on the opcode: checked per opcode at evaluation
    for leaf in query.leaves_of(expr):
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
            expr = query.parse(pred[1])
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
        watermark=watermark,
        predicates=validate_predicates(predicates),
        action=validate_action(action),
        reason_trail=trail,
        serial_no=previous.serial_no if previous else 0,
        ctime=previous.ctime if previous else 0.0,
        mtime=previous.mtime if previous else 0.0,
    )
    compile_rule(rule, strict=True)
    return rule


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


# ---------------------------------------------------------------------------------------------
# Compilation

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


def _all(tests: Sequence[JobTest]) -> JobTest | None:
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


def compile_rule(rule: FilterRule, *, strict: bool = False) -> CompiledRule:
    """Compile a rule once.  strict: raise FilterError as at add time; else a rule that does
    not compile (a bad stored rule) is `never` matching, with the reason in `error`."""
    cr = CompiledRule(rule)
    try:
        if strict:
            validate_priority(rule.priority)
            validate_predicates(rule.predicates)
        cr.verdict = _verdict_of(validate_action(rule.action), rule.uuid)
        _compile_predicates(cr, rule)
    except FilterError as exc:
        if strict:
            raise
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
            iv = query.id_interval(expr, rule.watermark)
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
                cr.opid_guard = _smaller(cr.opid_guard, query.required_values(expr, "OP_ID"))
                for f in sorted(fields - {"OP_ID"}):
                    vals = query.required_values(expr, f) if "." not in f else None
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
                vals = query.required_values(expr, field)
                if vals is not None:
                    value_guard = _smaller(value_guard, frozenset((tag, v) for v in vals))
                pats = query.required_patterns(expr, field)
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
    cr.tests, cr.opset_tests, cr.residual = tuple(tests), tuple(opset_tests), _all(residual)
    if cr.patterns is not None:
        parts = [query.combinable(p) for p in cr.patterns[1]]
        if parts and all(p is not None for p in parts):
            cr.alternation = "|".join(p for p in parts if p is not None)
    if proj_all and tests:
        cr.proj_all = tuple(sorted(proj_all))
    if proj_res and residual:
        cr.proj_residual = tuple(sorted(proj_res))


# ---------------------------------------------------------------------------------------------
# The evaluator

# A candidate: (position in the order, check, verdict); the rule matches iff check is None or
# check(job).  _Indexed adds the opcode fields the check depends on (for projection groups).
Entry: TypeAlias = tuple[int, JobTest | None, Verdict]
_Indexed: TypeAlias = tuple[int, JobTest | None, Verdict, tuple[str, ...] | None]
_EMPTY: Final[frozenset[Any]] = frozenset()
_CACHE_LIMIT: Final = 100_000
_CHUNK: Final = 32  # regexes per second-level prefilter
_MIN_GROUP: Final = 3  # candidates reading the same opcode fields worth a projection memo
_NOT_CACHED: Final = object()


class _RegexGroup:
    """Rules that need one of their regexes to match a reason text (or source).

    One alternation of all their regexes says in one search per text whether any may match;
    only then are the chunks' alternations searched to find which rules are candidates.
    Compiled alternations are shared with the next chain through `cache`.
    """

    __slots__ = ("chunks", "search")

    def __init__(
        self, members: list[tuple[str, _Indexed]], cache: dict[str, Callable[[str], Any]]
    ) -> None:
        self.chunks: list[tuple[Callable[[str], Any], tuple[_Indexed, ...]]] = []
        alternatives: list[str] = []
        for i in range(0, len(members), _CHUNK):
            part = members[i : i + _CHUNK]
            pattern = "|".join(p for p, _ in part)
            self.chunks.append((_compiled(pattern, cache), tuple(e for _, e in part)))
            alternatives.append(pattern)
        self.search = _compiled("|".join(alternatives), cache)

    def hits(self, texts: frozenset[str]) -> tuple[int, ...]:
        """Indices of the chunks that have a regex matching one of the texts."""
        search = self.search
        for text in texts:
            if search(text) is not None:
                break
        else:
            return ()
        out = []
        for i, (chunk_search, _) in enumerate(self.chunks):
            for text in texts:
                if chunk_search(text) is not None:
                    out.append(i)
                    break
        return tuple(out)


def _compiled(pattern: str, cache: dict[str, Callable[[str], Any]]) -> Callable[[str], Any]:
    search = cache.get(pattern)
    if search is None:
        search = cache[pattern] = re.compile(pattern).search
    return search


class _ProjectionGroup:
    """Candidates whose checks read nothing but the same opcode fields.

    Their outcome depends only on the values of those fields in each opcode, so the first
    matching member is memoised per projection of the job's opcodes onto the fields: jobs
    that look alike (the same OP_ID, the same parameters) are tested once, not once per job.
    """

    __slots__ = ("fields", "members", "memo")

    def __init__(self, fields: tuple[str, ...], members: tuple[Entry, ...]) -> None:
        self.fields = fields
        self.members = members
        self.memo: dict[Any, Entry | None] = {}

    def first(self, job: FilterJob) -> Entry | None:
        """The first member (in order) that matches the job, or None."""
        key: list[Any] = []
        for op in job.ops:
            for f in self.fields:
                v = op.get(f, _NOT_CACHED)
                key.append(v.__class__)  # 0, 0.0 and False are equal dict keys
                key.append(v)
        memo_key = tuple(key)
        try:
            hit = self.memo.get(memo_key, _NOT_CACHED)
        except TypeError:  # an unhashable value (list, dict): no memo
            return self._scan(job)
        if hit is not _NOT_CACHED:
            return hit  # type: ignore[return-value]
        found = self._scan(job)
        if len(self.memo) >= _CACHE_LIMIT:
            self.memo.clear()
        self.memo[memo_key] = found
        return found

    def _scan(self, job: FilterJob) -> Entry | None:
        for entry in self.members:
            check = entry[1]
            if check is None or check(job):
                return entry
        return None


_Candidates: TypeAlias = tuple[tuple[Entry, ...], tuple[_ProjectionGroup, ...]]


class FilterChain:
    """The compiled, ordered filter rules; `verdict(job)` gives the job's applying rule.

    Build a new chain whenever the filter set changes, passing the old one as `previous` so
    unchanged rules are not compiled again.  Rules may be FilterRules or stored dicts; stored
    rules that do not decode or compile never apply and are listed in `errors` (a bad config
    must not stop the queue).

    Speed: every rule is indexed under one necessary condition — a key the job must have
    (an opcode param value, a reason text or source), an OP_ID, a job-id range, or a regex
    that must match a reason — and only a job's candidate rules are tested, in order.  The
    candidate list per (OP_ID set, id segment, key hits, regex hits) is memoised, and
    candidates that read only the same opcode fields share a memo per projection of the
    job's opcodes, so a job typically costs a set intersection, a few dict lookups and the
    tests of a few candidates.  The memos make a chain stateful but not observably so:
    verdicts are a pure function of (rules, job).  A chain is meant for one thread (the
    daemon's event loop).
    """

    def __init__(
        self,
        rules: Iterable[FilterRule | Mapping[str, Any]] = (),
        *,
        previous: FilterChain | None = None,
    ) -> None:
        self.errors: dict[str, str] = {}
        old = previous._by_uuid if previous is not None else {}
        compiled: list[CompiledRule] = []
        for raw in rules:
            try:
                rule = rule_from_wire(raw)
            except FilterError as exc:
                uuid = raw.get("uuid") if isinstance(raw, Mapping) else None
                self.errors[str(uuid)] = exc.message
                continue
            prev = old.get(rule.uuid)
            cr = prev if prev is not None and prev.rule == rule else compile_rule(rule)
            if cr.error is not None:
                self.errors[rule.uuid] = cr.error
            compiled.append(cr)
        try:
            compiled.sort(key=lambda c: order_key(c.rule))
        except TypeError:  # ill-typed stored fields: order what compares, as strings
            compiled.sort(key=lambda c: tuple(str(x) for x in order_key(c.rule)))
        self.compiled: tuple[CompiledRule, ...] = tuple(compiled)
        self.rules: tuple[FilterRule, ...] = tuple(c.rule for c in compiled)
        self._by_uuid: dict[str, CompiledRule] = {c.rule.uuid: c for c in compiled}
        old_regexes = previous._regex_cache if previous is not None else {}
        self._build_index(old_regexes)

    # -- index -------------------------------------------------------------------------------

    def _build_index(self, old_regexes: dict[str, Callable[[str], Any]]) -> None:
        active: list[CompiledRule] = []
        general: list[_Indexed] = []
        by_opid: dict[str, list[int]] = {}
        opid_free: list[int] = []  # decided by the OP_ID set but with no finite guard
        by_value: dict[tuple[str, ...], list[_Indexed]] = {}
        id_rules: list[tuple[int, int, _Indexed]] = []
        regex_members: dict[str, list[tuple[str, _Indexed]]] = {"reason": [], "source": []}
        for cr in self.compiled:
            if cr.verdict is None or cr.never:
                continue  # CONTINUE never applies; a never-matching rule neither
            pos = len(active)
            active.append(cr)
            entry: _Indexed = (pos, _all(cr.tests), cr.verdict, cr.proj_all)
            if cr.value_guard is not None:
                for key in cr.value_guard:
                    by_value.setdefault(key, []).append(entry)
            elif cr.opset_tests or cr.opid_guard is not None:
                if cr.opid_guard is not None:
                    for op_id in cr.opid_guard:
                        by_opid.setdefault(op_id, []).append(pos)
                else:
                    opid_free.append(pos)
            elif cr.id_range is not None:
                id_rules.append((cr.id_range[0], cr.id_range[1], entry))
            elif cr.alternation is not None and cr.patterns is not None:
                regex_members[cr.patterns[0]].append((cr.alternation, entry))
            else:
                general.append(entry)
            if cr.unconditional:
                break  # every later rule is unreachable
        self._active = tuple(active)
        self._general = tuple(general)
        self._by_opid = by_opid
        self._opid_free = tuple(opid_free)
        self._by_value = by_value
        keys = frozenset(by_value)
        self._param_keys = frozenset(k[1:] for k in keys if k[0] == "p")
        self._reason_keys = frozenset(k[1] for k in keys if k[0] == "r")
        self._source_keys = frozenset(k[1] for k in keys if k[0] == "s")
        self._id_rules = tuple(id_rules)
        self._id_breaks = sorted({lo for lo, _, _ in id_rules} | {hi + 1 for _, hi, _ in id_rules})
        self._regex_cache: dict[str, Callable[[str], Any]] = {}
        cache = self._regex_cache
        for pattern, search in old_regexes.items():
            cache[pattern] = search
        reason_members, source_members = regex_members["reason"], regex_members["source"]
        self._rx_reason = _RegexGroup(reason_members, cache) if reason_members else None
        self._rx_source = _RegexGroup(source_members, cache) if source_members else None
        used = {g.search for g in (self._rx_reason, self._rx_source) if g is not None}
        used.update(c for g in (self._rx_reason, self._rx_source) if g for c, _ in g.chunks)
        for pattern in [p for p, f in cache.items() if f not in used]:
            del cache[pattern]  # keep only what this chain uses
        self._ops_cache: dict[frozenset[str], tuple[_Indexed, ...]] = {}
        self._id_cache: dict[int, tuple[_Indexed, ...]] = {}
        self._groups: dict[Any, _ProjectionGroup] = {}
        self._merged: dict[Any, _Candidates] = {}
        self._shared: dict[Any, tuple[Any, Any, _Candidates]] = {}

    def _ops_part(self, op_ids: frozenset[str]) -> tuple[_Indexed, ...]:
        """Rules indexed by OP_ID that a job with these OP_IDs can match (memoised)."""
        part = self._ops_cache.get(op_ids)
        if part is not None:
            return part
        positions = set(self._opid_free)
        for op_id in op_ids:
            positions.update(self._by_opid.get(op_id, ()))
        fake_ops = [{"OP_ID": op_id} for op_id in op_ids]
        out: list[_Indexed] = []
        for pos in sorted(positions):
            cr = self._active[pos]
            verdict = cr.verdict
            if verdict is not None and all(any(t(op) for op in fake_ops) for t in cr.opset_tests):
                out.append((pos, cr.residual, verdict, cr.proj_residual))
        part = tuple(out)
        if len(self._ops_cache) >= _CACHE_LIMIT:
            self._clear_memos()
        self._ops_cache[op_ids] = part
        return part

    def _id_part(self, segment: int, job_id: int) -> tuple[_Indexed, ...]:
        """Rules indexed by job-id range whose range holds this segment (memoised)."""
        part = self._id_cache.get(segment)
        if part is None:
            part = tuple(e for lo, hi, e in self._id_rules if lo <= job_id <= hi)
            if len(self._id_cache) >= _CACHE_LIMIT:
                self._clear_memos()
            self._id_cache[segment] = part
        return part

    def _clear_memos(self) -> None:
        """Forget every memo (they are bounded; `_shared` is keyed by the parts' ids)."""
        for memo in (self._ops_cache, self._id_cache, self._merged, self._shared):
            memo.clear()

    def _candidates(
        self, job: FilterJob, key: Any, values: Iterable[tuple[str, ...]], rx: Any
    ) -> _Candidates:
        """Merge the candidate rules of the job's signature `key`, in order (memoised).

        Signatures whose index parts are the same objects share one merge (`_shared`).
        """
        ops_part = self._ops_part(job.op_ids)
        id_part = (
            self._id_part(bisect_right(self._id_breaks, job.id), job.id) if self._id_rules else ()
        )
        shared_key = (id(ops_part), id(id_part), frozenset(values), rx)
        shared = self._shared.get(shared_key)
        if shared is not None:
            candidates = shared[2]
        else:
            candidates = self._merge(ops_part, id_part, values, rx)
            # the parts are kept alive with the entry so that their ids are not reused
            self._shared[shared_key] = (ops_part, id_part, candidates)
        if len(self._merged) >= _CACHE_LIMIT or len(self._shared) >= _CACHE_LIMIT:
            self._clear_memos()
        self._merged[key] = candidates
        return candidates

    def _merge(
        self,
        ops_part: tuple[_Indexed, ...],
        id_part: tuple[_Indexed, ...],
        values: Iterable[tuple[str, ...]],
        rx: Any,
    ) -> _Candidates:
        """The ordered candidates from the general rules and the job's index parts."""
        found: dict[int, _Indexed] = {e[0]: e for e in self._general}
        for e in ops_part:
            found[e[0]] = e
        for e in id_part:
            found[e[0]] = e
        for value_key in values:
            for e in self._by_value[value_key]:
                found[e[0]] = e
        if rx:
            for group, hits in zip((self._rx_reason, self._rx_source), rx, strict=True):
                if group is not None:
                    for i in hits:
                        for e in group.chunks[i][1]:
                            found[e[0]] = e
        ordered: list[_Indexed] = []
        for pos in sorted(found):
            ordered.append(found[pos])
            if found[pos][1] is None:
                break  # applies to every job that gets this far
        by_fields: dict[tuple[str, ...], list[_Indexed]] = {}
        for e in ordered:
            if e[3] is not None:
                by_fields.setdefault(e[3], []).append(e)
        grouped: set[int] = set()
        groups: list[_ProjectionGroup] = []
        for fields, members in by_fields.items():
            if len(members) >= _MIN_GROUP:
                gkey = (fields, tuple(e[0] for e in members))
                pgroup = self._groups.get(gkey)
                if pgroup is None:
                    pgroup = _ProjectionGroup(fields, tuple((p, c, v) for p, c, v, _ in members))
                    self._groups[gkey] = pgroup
                groups.append(pgroup)
                grouped.update(e[0] for e in members)
        entries = tuple((p, c, v) for p, c, v, _ in ordered if p not in grouped)
        return (entries, tuple(groups))

    # -- evaluation --------------------------------------------------------------------------

    def _signature(self, job: FilterJob) -> tuple[Any, list[tuple[str, ...]], Any]:
        """The memo key of a job's candidates, the value keys it hits, the regex hits."""
        values: list[tuple[str, ...]] = []
        if self._param_keys:
            values.extend(("p", *kv) for kv in job.op_values & self._param_keys)
        if self._reason_keys:
            values.extend(("r", t) for t in job.reason_texts & self._reason_keys)
        if self._source_keys:
            values.extend(("s", t) for t in job.reason_sources & self._source_keys)
        rx: Any = ()
        if self._rx_reason is not None or self._rx_source is not None:
            rr = self._rx_reason.hits(job.reason_texts) if self._rx_reason else ()
            rs = self._rx_source.hits(job.reason_sources) if self._rx_source else ()
            if rr or rs:
                rx = (rr, rs)
        seg = bisect_right(self._id_breaks, job.id) if self._id_rules else 0
        if values or rx:
            return (job.op_ids, seg, frozenset(values), rx), values, rx
        return (job.op_ids, seg) if seg else job.op_ids, values, rx

    def verdict(self, job: FilterJob) -> Verdict | None:
        """The applying rule's verdict for the job; None: no rule applies (the job may run)."""
        key, values, rx = self._signature(job)
        candidates = self._merged.get(key)
        if candidates is None:
            candidates = self._candidates(job, key, values, rx)
        entries, groups = candidates
        if not groups:
            for _, check, verdict in entries:
                if check is None or check(job):
                    return verdict
            return None
        best: Entry | None = None
        for group in groups:
            hit = group.first(job)
            if hit is not None and (best is None or hit[0] < best[0]):
                best = hit
        limit = best[0] if best is not None else len(self._active)
        for pos, check, verdict in entries:
            if pos > limit:
                break
            if check is None or check(job):
                return verdict
        return best[2] if best is not None else None

    def verdicts(self, jobs: Iterable[FilterJob]) -> list[Verdict | None]:
        """`verdict` for each job, in order."""
        v = self.verdict
        return [v(job) for job in jobs]

    def verdict_linear(self, job: FilterJob) -> Verdict | None:
        """The same answer by testing every rule in order (no index): the reference."""
        for cr in self.compiled:
            if cr.verdict is not None and cr.matches(job):
                return cr.verdict
        return None

    def applying_rule(self, job: FilterJob) -> FilterRule | None:
        """The rule that applies to the job, or None."""
        v = self.verdict(job)
        return None if v is None else self._by_uuid[v.rule_uuid].rule

    def rule(self, uuid: str) -> FilterRule | None:
        """The rule with this uuid, or None."""
        cr = self._by_uuid.get(uuid)
        return cr.rule if cr is not None else None

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return f"FilterChain({len(self.rules)} rules, {len(self._active)} active)"


def applying_verdict(
    rules: Iterable[FilterRule | Mapping[str, Any]], job: FilterJob
) -> Verdict | None:
    """One-off evaluation (builds a chain; keep a FilterChain for repeated use)."""
    return FilterChain(rules).verdict(job)
