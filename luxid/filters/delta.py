"""Verdicts carried over a change of the rules (pure): a job is judged again only as far as
the change can alter its verdict (docs/contracts.md#filters).

A job's verdict is the first rule, in order, that matches it and is not CONTINUE.  When the
rules change, call the changed ones (added, removed or altered, by uuid) the delta.  For a
job whose old verdict came from an unchanged rule R (or from no rule), every unchanged rule
before R did not match and still does not, and R still matches, so the new verdict is the
first of: the delta's new rules that match the job and come before R, else R itself.  Only a
job whose old verdict came from a changed rule needs the whole chain again, and a job that
no new rule can match (luxid.filters.job_index) keeps its verdict untouched.  So after one
rule changed, a pass over 100,000 queued jobs judges the few jobs the rule concerns instead
of running the chain of 1,000 rules for each (docs/contracts.md#performance-targets).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from client.filterrules import FilterRule
from luxid.filters.chain import FilterChain
from luxid.filters.job import FilterJob
from luxid.filters.job_index import JobIndex
from luxid.filters.verdict import Verdict

# Beyond this many changed rules a job is judged by the whole chain again: the delta's own
# chain would cost about as much.
MAX_DELTA: Final = 32


class VerdictDelta:
    """How verdicts judged under the rules `base` become the verdicts of `chain`, the
    compiled `rules`.

    Build it with `between`, which says None when the change is too large to be worth it
    (or the rules' order is not their key order, which a subset of them could not
    reproduce).  `changed` are the uuids of the rules added, removed or altered.
    """

    __slots__ = ("_added", "_position", "chain", "changed")

    def __init__(
        self, rules: Mapping[str, FilterRule], chain: FilterChain, changed: frozenset[str]
    ) -> None:
        self.chain = chain
        self.changed = changed
        self._added = FilterChain([rules[u] for u in self.changed if u in rules], previous=chain)
        self._position = {cr.rule.uuid: i for i, cr in enumerate(chain.compiled)}

    @classmethod
    def between(
        cls, base: Mapping[str, FilterRule], rules: Mapping[str, FilterRule], chain: FilterChain
    ) -> VerdictDelta | None:
        """The delta from `base` to `rules` (compiled as `chain`), or None if re-judging
        every job by the whole chain is as cheap or the only correct way."""
        changed = frozenset(u for u in base.keys() | rules.keys() if base.get(u) != rules.get(u))
        if len(changed) > MAX_DELTA or not chain.key_ordered:
            return None
        delta = cls(rules, chain, changed)
        return delta if delta._added.key_ordered else None

    def affected(self, index: JobIndex, known: Mapping[int, Verdict | None]) -> set[int] | None:
        """The ids of the jobs whose verdict may change: those whose `known` verdict came
        from a changed rule, and those a new or altered rule may match (`index`, which
        must hold every job of `known`); None: any job.  Every other job keeps its verdict."""
        changed = self.changed
        out = {i for i, v in known.items() if v is not None and v.rule_uuid in changed}
        for cr in self._added.compiled:
            reach = index.candidates(cr)
            if reach is None:
                return None
            out |= reach
        return out

    def verdict(self, old: Verdict | None, job: FilterJob) -> Verdict | None:
        """The job's verdict under the new rules, given `old`, its verdict under `base`."""
        position = self._position
        if old is not None and (old.rule_uuid in self.changed or old.rule_uuid not in position):
            return self.chain.verdict(job)
        new = self._added.verdict(job) if self._added.rules else None
        if new is None:
            return old
        if old is None or position[new.rule_uuid] < position[old.rule_uuid]:
            return new
        return old
