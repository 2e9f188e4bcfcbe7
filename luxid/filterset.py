"""The filter rules luxid applies now, compiled, and each job as the filters see it.

The rules come from the wconfd configuration (luxid.config follows it); this module holds
the current set, compiles it into a FilterChain when it changes (reusing the unchanged
rules' compilation) and caches one FilterJob per job.  A chain is meant for one thread, so
the store's worker thread, which applies REJECT rules to jobs as it stores them (SPEC
§6.2: a rejected job is stored `canceled`), builds its own chain from the same rules.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from client.errors import FilterError
from luxid.filters import FilterChain, FilterJob, FilterRule, rule_from_wire
from luxid.filters.ratelimit import rejected_result
from luxid.filters.verdict import Verdict
from luxid.jobs import Job, mark_canceled

log = logging.getLogger(__name__)


def filter_job(job: Job) -> FilterJob:
    """The filters' view of a job: its id and its opcodes as stored (reason trails included)."""
    return FilterJob(job.id, [op.input for op in job.ops])


class RuleSnapshot:
    """An immutable set of rules; `chain()` compiles it once per thread that asks."""

    def __init__(self, rules: tuple[FilterRule, ...]) -> None:
        self.rules = rules
        self._local = threading.local()

    def chain(self, previous: FilterChain | None = None) -> FilterChain:
        """This thread's compiled chain of these rules."""
        chain: FilterChain | None = getattr(self._local, "chain", None)
        if chain is None:
            chain = FilterChain(self.rules, previous=previous)
            self._local.chain = chain
        return chain

    def reject_on_submit(self, job: Job, now: float) -> Job:
        """The job as stored at submit: `canceled` if a REJECT rule applies (any thread)."""
        if not self.rules:
            return job
        verdict = self.chain().verdict(filter_job(job))
        if verdict is not None and verdict.action == "REJECT":
            return mark_canceled(job, now, rejected_result(verdict.rule_uuid))
        return job


class FilterSet:
    """The current rules (event-loop side), their chain and the FilterJob cache."""

    def __init__(self) -> None:
        self.snapshot = RuleSnapshot(())
        self._chain = self.snapshot.chain()
        self._fjobs: dict[int, FilterJob] = {}

    def __len__(self) -> int:
        return len(self.snapshot.rules)

    def replace_all(self, stored: Iterable[FilterRule | Mapping[str, Any]]) -> bool:
        """Take the configuration's rules; True if they differ from the current ones.

        Rules that do not decode are left out and rules that do not compile never apply
        (a bad rule written directly into wconfd must not stop the queue); both are logged.
        """
        rules: list[FilterRule] = []
        for raw in stored:
            try:
                rules.append(rule_from_wire(raw))
            except FilterError as exc:
                log.warning("ignoring a malformed filter rule in the configuration: %s", exc)
                continue
        rules.sort(key=lambda r: r.uuid)
        if tuple(rules) == tuple(sorted(self.snapshot.rules, key=lambda r: r.uuid)):
            return False
        self._install(tuple(rules))
        return True

    def put(self, rule: FilterRule) -> None:
        """Add or replace one rule (after luxid wrote it to wconfd)."""
        self._install((*(r for r in self.snapshot.rules if r.uuid != rule.uuid), rule))

    def remove(self, uuid: str) -> None:
        """Drop one rule (after luxid removed it from wconfd)."""
        self._install(tuple(r for r in self.snapshot.rules if r.uuid != uuid))

    def _install(self, rules: tuple[FilterRule, ...]) -> None:
        self.snapshot = RuleSnapshot(rules)
        self._chain = self.snapshot.chain(previous=self._chain)
        for uuid, error in self._chain.errors.items():
            log.warning("filter rule %s never applies: %s", uuid, error)

    # -- per job ---------------------------------------------------------------------

    def job_view(self, job: Job) -> FilterJob:
        """The cached FilterJob of a job (opcode inputs never change after submit)."""
        fjob = self._fjobs.get(job.id)
        if fjob is None:
            fjob = self._fjobs[job.id] = filter_job(job)
        return fjob

    def forget(self, job_id: int) -> None:
        """A job left the queue for good (finalized or archived)."""
        self._fjobs.pop(job_id, None)

    def verdict(self, job: Job) -> Verdict | None:
        """The applying rule's verdict for the job (None: no rule applies)."""
        if not self.snapshot.rules:
            return None
        return self._chain.verdict(self.job_view(job))

    def buckets(self, job: Job) -> frozenset[str]:
        """The job's reason-trail rate-limit buckets."""
        return self.job_view(job).buckets
