"""The live jobs indexed by what filter rules are indexed by (pure): which jobs a rule can
match at all, without testing every job (docs/contracts.md#filters).

luxid.filters.chain finds a job's candidate rules through each rule's necessary condition
(an opcode parameter value, a reason text or source, an OP_ID, a job-id range, a regex
over reason texts or sources).  This is the same index the other way round: from a rule's
condition to the jobs that meet it, a superset of the jobs the rule matches.  A rule
change re-judges only those jobs (luxid.filters.delta), so it costs what it can affect,
not the length of the queue.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterable
from typing import Any, TypeAlias, TypeVar

from luxid.filters.compile import CompiledRule
from luxid.filters.job import FilterJob

K = TypeVar("K", bound=Hashable)
# The jobs under one key: the id itself while there is one (most reason texts are one job's
# own, "job=<id>;index=<n>": a set each would be most of the index's memory), else a set.
Ids: TypeAlias = int | set[int]


def ids_of(entry: Ids | None) -> Iterable[int]:
    """The job ids of an index entry (none for a missing key)."""
    if entry is None:
        return ()
    return (entry,) if isinstance(entry, int) else entry


def _add(index: dict[K, Ids], keys: Iterable[K], job_id: int) -> None:
    for key in keys:
        entry = index.get(key)
        if entry is None:
            index[key] = job_id
        elif isinstance(entry, int):
            index[key] = {entry, job_id}
        else:
            entry.add(job_id)


def _drop(index: dict[K, Ids], keys: Iterable[K], job_id: int) -> None:
    for key in keys:
        entry = index.get(key)
        if entry == job_id or entry == {job_id}:
            del index[key]
        elif isinstance(entry, set):
            entry.discard(job_id)


class JobIndex:
    """FilterJobs by OP_ID, opcode `(param, value)`, reason text and source, and id."""

    __slots__ = ("_op_ids", "_params", "_sources", "_texts", "ids")

    def __init__(self) -> None:
        self.ids: set[int] = set()
        self._op_ids: dict[str, Ids] = {}
        self._params: dict[tuple[str, str], Ids] = {}
        self._texts: dict[str, Ids] = {}
        self._sources: dict[str, Ids] = {}

    def add(self, job: FilterJob) -> None:
        """Index a job (once per job id; `remove` it before indexing another view)."""
        self.ids.add(job.id)
        for index, keys in self._keys(job):
            _add(index, keys, job.id)

    def remove(self, job: FilterJob) -> None:
        """Drop a job indexed by `add`."""
        self.ids.discard(job.id)
        for index, keys in self._keys(job):
            _drop(index, keys, job.id)

    def _keys(self, job: FilterJob) -> tuple[tuple[dict[Any, Ids], Iterable[Any]], ...]:
        """Each index with the job's keys in it."""
        return (
            (self._op_ids, job.op_ids),
            (self._params, job.op_values),
            (self._texts, job.reason_texts),
            (self._sources, job.reason_sources),
        )

    def candidates(self, cr: CompiledRule) -> set[int] | None:
        """The ids of the indexed jobs that meet the necessary condition the chain indexes
        the rule by (a superset of those it matches: any necessary condition would do, so
        this stays right whatever the chain picks); None: any job may match."""
        if cr.verdict is None or cr.never:
            return set()
        if cr.value_guard is not None:
            out: set[int] = set()
            for key in cr.value_guard:
                if key[0] == "p":
                    out.update(ids_of(self._params.get((key[1], key[2]))))
                else:
                    by_text = self._texts if key[0] == "r" else self._sources
                    out.update(ids_of(by_text.get(key[1])))
            return out
        if cr.opset_tests or cr.opid_guard is not None:
            if cr.opid_guard is None:
                return None
            return set().union(*(ids_of(self._op_ids.get(op_id)) for op_id in cr.opid_guard))
        if cr.id_range is not None:
            lo, hi = cr.id_range
            if hi - lo < len(self.ids):
                return {i for i in range(lo, hi + 1) if i in self.ids}
            return {i for i in self.ids if lo <= i <= hi}
        if by_pattern(cr):
            return self.pattern_reach([cr])[cr]
        return None

    def pattern_reach(self, rules: Iterable[CompiledRule]) -> dict[CompiledRule, set[int]]:
        """`candidates` of the rules indexed by a regex (`by_pattern`), all found in one
        pass over the distinct reason texts and sources: one search of all the regexes
        together per text (jobs' texts are mostly their own), each regex only on a hit."""
        out: dict[CompiledRule, set[int]] = {}
        fields: dict[str, list[tuple[CompiledRule, str]]] = {}
        for cr in rules:
            if cr.alternation is not None and cr.patterns is not None:
                out[cr] = set()
                fields.setdefault(cr.patterns[0], []).append((cr, cr.alternation))
        for field, members in fields.items():
            any_of = re.compile("|".join(alt for _, alt in members)).search
            searches = [(cr, re.compile(alt).search) for cr, alt in members]
            by_text = self._texts if field == "reason" else self._sources
            for text in filter(any_of, by_text):
                for cr, search in searches:
                    if search(text) is not None:
                        out[cr].update(ids_of(by_text[text]))
        return out


def by_pattern(cr: CompiledRule) -> bool:
    """Whether the chain indexes the rule by a regex (it has no better condition)."""
    return (
        cr.value_guard is None
        and not cr.opset_tests
        and cr.opid_guard is None
        and cr.id_range is None
        and cr.alternation is not None
        and cr.patterns is not None
    )
