"""The filter rules luxid judges jobs by: one set, on the event loop
(docs/contracts.md#filters).

This is the single source of luxid's filter decisions: `query_filters` lists exactly these
rules, and every verdict — the REJECT of a job being submitted, the scheduling pass's
PAUSE / RATE_LIMIT / REJECT — is computed from them, on the event loop, by one compiled
chain.  So what `query_filters` shows is what the very next `submit_job` is judged by.

The set changes in two ways, both on the event loop: luxid's own `replace_filter` /
`delete_filter` update it before they answer, and luxid.wconfd_link hands over the rules
it reads from the configuration after each change (`wait_config_change`), which is how
rules written straight into wconfd arrive.  Each change compiles a new FilterChain,
reusing the unchanged rules' compilation.  One FilterJob per job is cached (opcode inputs
never change after submit).  Each job's verdict is remembered until the rules change; after
a change of a few rules a job is judged again only as far as the change can alter its
verdict (luxid.filters.delta), so the pass after a rule change does not run the whole
chain for every queued job.

Each job's verdict is counted in `lockwarden_filter_verdicts_total{action}` once when it
comes to apply to the job — at submit or at the first pass that judges it — and again only
if a different rule or action comes to apply; a job held by the same PAUSE rule through
many passes counts once.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from client import errors
from client._server.metrics import Registry
from client.filterrules import FILTER_FIELDS, FilterRule, filter_row, rule_from_wire
from luxid.filters import FilterChain, FilterJob, Verdict
from luxid.filters.bulk import judge_all
from luxid.filters.delta import VerdictDelta
from luxid.filters.job_index import JobIndex
from luxid.filters.ratelimit import paused_reason, rejected_result
from luxid.jobs import Job, mark_canceled, set_pending_reason

log = logging.getLogger(__name__)


def filter_job(job: Job) -> FilterJob:
    """The filters' view of a job: its id and its opcodes as stored (reason trails included)."""
    return FilterJob(job.id, [op.input for op in job.ops])


class ActiveFilters:
    """The current rules by uuid, their chain and the FilterJob cache (event loop only)."""

    def __init__(self, metrics: Registry) -> None:
        self.rules: dict[str, FilterRule] = {}
        self._chain = FilterChain()
        self._fjobs: dict[int, FilterJob] = {}
        # Each live job's verdict under the current chain: a function of the rules and the
        # job's id and opcode inputs only, so a pass with the same rules looks it up
        # instead of running the chain (half of a pass over 100,000 queued jobs).
        self._verdict_of: dict[int, Verdict | None] = {}
        # After a change of a few rules (`_delta`): the verdicts, under the rules before
        # it, of the jobs the change may concern (the others stay in `_verdict_of`), and the
        # live jobs by what rules are indexed by, to find those jobs.
        self._delta: VerdictDelta | None = None
        self._stale: dict[int, Verdict | None] = {}
        self._index = JobIndex()
        # The jobs to judge afresh, all at once, when the first of them is asked for.
        self._unjudged: set[int] = set()
        self._counted: dict[int, Verdict] = {}  # the verdict last counted per live job
        self._verdicts = metrics.counter("lockwarden_filter_verdicts_total")

    def __len__(self) -> int:
        return len(self.rules)

    # -- changes ---------------------------------------------------------------------

    def replace_all(self, stored: Iterable[FilterRule | Mapping[str, Any]]) -> bool:
        """Take the configuration's rules; True if they differ from the current ones.

        Rules that do not decode are left out and rules that do not compile never apply
        (a bad rule written directly into wconfd must not stop the queue); both are logged.
        """
        rules: dict[str, FilterRule] = {}
        for raw in stored:
            try:
                rule = rule_from_wire(raw)
            except errors.FilterError as exc:
                log.warning("ignoring a malformed filter rule in the configuration: %s", exc)
                continue
            rules[rule.uuid] = rule
        if rules == self.rules:
            return False
        self._install(rules)
        return True

    def put(self, rule: FilterRule) -> None:
        """Add or replace one rule (luxid wrote it to wconfd)."""
        self._install({**self.rules, rule.uuid: rule})

    def remove(self, uuid: str) -> None:
        """Drop one rule (luxid removed it from wconfd)."""
        self._install({k: r for k, r in self.rules.items() if k != uuid})

    def _install(self, rules: dict[str, FilterRule]) -> None:
        previous = self.rules
        self.rules = rules
        self._chain = FilterChain(rules.values(), previous=self._chain)
        for uuid, error in self._chain.errors.items():
            log.warning("filter rule %s never applies: %r", uuid, error)
        # the verdicts known for `previous` (none while there were no rules: nothing is
        # remembered then); the jobs an earlier change left to judge are judged afresh
        known = self._verdict_of if previous else {}
        carried = self._unjudged | self._stale.keys()
        self._verdict_of, self._stale = {}, {}
        self._delta = VerdictDelta.between(previous, rules, self._chain) if known else None
        if self._delta is None:
            self._unjudged = set(self._fjobs)
            return
        affected = self._delta.affected(self._index, known)
        # the jobs the change concerns: judged afresh if their rule changed, else from
        # their verdict; the others keep theirs
        changed, self._unjudged = self._delta.changed, carried
        for i in set(known) if affected is None else affected:
            if i in known:
                old = known.pop(i)
                if old is not None and old.rule_uuid in changed:
                    self._unjudged.add(i)
                else:
                    self._stale[i] = old
        self._verdict_of = known

    # -- query_filters ---------------------------------------------------------------

    def rows(self, uuids: Sequence[str] | None, fields: Sequence[str] | None) -> list[list[Any]]:
        """query_filters' answer: one row per rule (all, by uuid, or the ones asked for)."""
        if fields is not None:
            unknown = [f for f in fields if f not in FILTER_FIELDS]
            if unknown:
                raise errors.InvalidParams(
                    f"fields: unknown filter field(s) {', '.join(map(repr, unknown))}"
                    f" (known: {' '.join(FILTER_FIELDS)})"
                )
        if uuids is None:
            chosen = [self.rules[key] for key in sorted(self.rules)]
        else:
            missing = [u for u in uuids if u not in self.rules]
            if missing:
                raise errors.NotFound(f"no filter rule with uuid {', '.join(missing)}")
            chosen = [self.rules[u] for u in uuids]
        return [filter_row(rule, fields) for rule in chosen]

    # -- per job ---------------------------------------------------------------------

    def job_view(self, job: Job) -> FilterJob:
        """The cached FilterJob of a job (opcode inputs never change after submit)."""
        fjob = self._fjobs.get(job.id)
        if fjob is None:
            fjob = self._fjobs[job.id] = filter_job(job)
            self._index.add(fjob)
        return fjob

    def forget(self, job_id: int) -> None:
        """A job left the queue for good (finalized or archived)."""
        fjob = self._fjobs.pop(job_id, None)
        if fjob is not None:
            self._index.remove(fjob)
        self._stale.pop(job_id, None)
        self._unjudged.discard(job_id)
        self._verdict_of.pop(job_id, None)
        self._counted.pop(job_id, None)

    def verdict(self, job: Job) -> Verdict | None:
        """The applying rule's verdict for the job (None: no rule applies); counted in the
        metrics when it differs from the one last counted for the job."""
        if not self.rules:
            return None
        memo = self._verdict_of
        if job.id in memo:
            verdict = memo[job.id]
        else:
            verdict = memo[job.id] = self._judge(job)
        if (
            verdict is not None
            and (seen := self._counted.get(job.id)) is not verdict
            and seen != verdict
        ):
            self._counted[job.id] = verdict
            self._verdicts.inc(verdict.action)
        return verdict

    def _judge(self, job: Job) -> Verdict | None:
        """The job's verdict under the current rules: after a change, all those to be
        judged afresh at once (luxid.filters.bulk), else from its verdict before the
        change where the change concerns it, else by the chain."""
        fjob = self.job_view(job)
        if self._unjudged:
            unjudged, self._unjudged = self._unjudged, set()
            judged = judge_all(self._chain, self._index, self._fjobs, unjudged)
            self._verdict_of.update(judged)
            self._count(judged)
            if job.id in self._verdict_of:
                return self._verdict_of[job.id]
        delta, stale = self._delta, self._stale
        if delta is not None and job.id in stale:
            return delta.verdict(stale.pop(job.id), fjob)
        return self._chain.verdict(fjob)

    def _count(self, judged: Mapping[int, Verdict | None]) -> None:
        """Count the verdicts judged all at once, as `verdict` counts one: once per job
        and verdict, added per action."""
        counted, tally = self._counted, Counter[str]()
        for job_id, verdict in judged.items():
            if verdict is not None and counted.get(job_id) != verdict:
                counted[job_id] = verdict
                tally[verdict.action] += 1
        for action, n in tally.items():
            self._verdicts.inc(action, by=n)

    def buckets(self, job: Job) -> frozenset[str]:
        """The job's reason-trail rate-limit buckets."""
        return self.job_view(job).buckets

    def judge_new(self, job: Job, now: float) -> Job:
        """A job being submitted, as it is stored: `canceled` if a REJECT rule applies
        (its id is still returned to the client), held with its pending_reason if a PAUSE
        rule does (so its first event says why, docs/contracts.md#events)."""
        verdict = self.verdict(job)
        if verdict is not None and verdict.action == "REJECT":
            self.forget(job.id)
            return mark_canceled(job, now, rejected_result(verdict.rule_uuid))
        if verdict is not None and verdict.action == "PAUSE":
            return set_pending_reason(job, paused_reason(verdict.rule_uuid))
        return job
