"""The filter evaluator (docs/contracts.md#filters): `FilterChain(rules).verdict(job)` is
the job's applying rule's verdict, or None when no rule applies.

A rule *applies* to a job if it is the first, in `(priority, watermark, uuid)` order, whose
predicates all match the job (no predicates: always) and whose action is not CONTINUE.
CONTINUE rules therefore never change anything; the chain drops them.  Built once per
filter-set change from the rules compiled by luxid.filters.compile.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, TypeAlias

from client.errors import FilterError
from client.filterrules import FilterRule, order_key, rule_from_wire
from luxid.filters.compile import CompiledRule, JobTest, all_of, compile_rule
from luxid.filters.job import FilterJob
from luxid.filters.verdict import Verdict

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
        # Whether the rules are in their (priority, watermark, uuid) order, the same for
        # any subset of them (luxid.active_filters re-judges jobs by a subset).
        self.key_ordered = True
        try:
            compiled.sort(key=lambda c: order_key(c.rule))
        except TypeError:  # ill-typed stored fields: order what compares, as strings
            compiled.sort(key=lambda c: tuple(str(x) for x in order_key(c.rule)))
            self.key_ordered = False
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
            entry: _Indexed = (pos, all_of(cr.tests), cr.verdict, cr.proj_all)
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

    def __len__(self) -> int:
        return len(self.rules)

    def __repr__(self) -> str:
        return f"FilterChain({len(self.rules)} rules, {len(self._active)} active)"
