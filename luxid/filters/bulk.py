"""Many jobs judged at once, rule by rule (pure): the verdicts `FilterChain.verdict` would
give, found from the rules' side (docs/contracts.md#filters).

The chain judges one job at a time: its cost is per job, whatever the rules.  After the
rules changed wholesale (at start, or a change of many rules, or of the rule many jobs were
held by), every queued job needs a verdict, and most rules concern few or none of them.  So
here the rules are taken in the chain's order, each tested only against the not yet judged
jobs its necessary condition reaches (luxid.filters.job_index); a job's verdict is the first
rule that matches it.  The work is the sum of those reaches, not jobs x rules; if it grows
past a few tests per job (rules that reach every job, none of them matching) the jobs left
are left to the chain.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Final

from luxid.filters.chain import FilterChain
from luxid.filters.compile import all_of
from luxid.filters.job import FilterJob
from luxid.filters.job_index import JobIndex, by_pattern
from luxid.filters.verdict import Verdict

# Tests per job (plus a constant) after which the jobs left are judged by the chain.
WORK_PER_JOB: Final = 4
WORK_FLOOR: Final = 1_000


def judge_all(
    chain: FilterChain, index: JobIndex, jobs: Mapping[int, FilterJob], ids: Collection[int]
) -> dict[int, Verdict | None]:
    """The verdicts of `chain` for the jobs `ids` (views in `jobs`, all in `index`); a job
    left out was not judged (the work grew too large): ask the chain."""
    unjudged = set(ids)
    out: dict[int, Verdict | None] = {}
    budget = WORK_PER_JOB * len(unjudged) + WORK_FLOOR
    patterned = index.pattern_reach(cr for cr in chain.compiled if by_pattern(cr))
    for cr in chain.compiled:
        if not unjudged:
            break
        verdict = cr.verdict
        if verdict is None or cr.never:
            continue
        reach = patterned[cr] if cr in patterned else index.candidates(cr)
        candidates = unjudged if reach is None else reach & unjudged
        check = all_of(cr.tests)
        if check is None:  # matches every job: no later rule is reached
            matched = set(candidates)
        else:
            budget -= len(candidates)
            if budget < 0:
                return out
            matched = {i for i in candidates if check(jobs[i])}
        for i in matched:
            out[i] = verdict
        unjudged -= matched
    for i in unjudged:
        out[i] = None
    return out
