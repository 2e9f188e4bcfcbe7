"""Rate limits, pure: reason-trail buckets (Ganeti's JQScheduler.hs) and RATE_LIMIT slot counting.

**Reason buckets.** A reason *text* (the second element of a reason entry) of the form
`rate-limit:<n>:<label>` — `n` ASCII digits with value > 0, nothing before `rate-limit` —
puts the job in bucket `"<n>:<label>"` (the text after `rate-limit:`, verbatim), whose limit
is n.  So `rate-limit:2:x` and `rate-limit:3:x` are different buckets.  `rate-limit:3` (no
label) is bucket `"3"`.  A job is in every distinct bucket named by any reason of any of its
opcodes and needs one free slot in each.  (Ganeti's Haskell `reads` would also take `" 7"` or
`"(7)"`; Lockwarden does not: no leading space, docs/contracts.md#filters.)

**RATE_LIMIT n rules.** A job whose applying rule is `RATE_LIMIT n` starts only while fewer
than n running jobs have *that same rule* as their applying rule, evaluated with the current
chain (Ganeti re-evaluates running jobs, so jobs that were running when the rule was added
count but are never stopped).

How a scheduling pass uses this module (see `Admission`):

1. `Admission.from_running(...)` with, for every running job (a process started or being
   started: waiting/running/canceling, plus jobs chosen earlier in this pass), its current
   verdict `chain.verdict(job)` and its `FilterJob.buckets`.
2. For each eligible queued job in (priority, id) order: REJECT → cancel it (not here);
   otherwise `reason = admission.try_start(verdict, job.buckets)`: None means it may start
   (its slots are now taken — stop when max_running_jobs is reached); else `reason` is the
   job's pending_reason text.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

from luxid.filters.verdict import Hold, Verdict

PREFIX: Final = "rate-limit"


def parse_reason_rate_limit(text: str) -> tuple[str, int] | None:
    """`"rate-limit:20:my label"` → `("20:my label", 20)`; None if the text is not a bucket."""
    parts = text.split(":")
    if len(parts) < 2 or parts[0] != PREFIX:
        return None
    n_str = parts[1]
    if not (n_str.isascii() and n_str.isdigit()):
        return None
    n = int(n_str)
    if n <= 0:
        return None
    return ":".join(parts[1:]), n


def bucket_of(text: str) -> str | None:
    """The bucket key `"<n>:<label>"` a reason text names, or None."""
    if not text.startswith(PREFIX):  # the fast path: almost no reason is a bucket
        return None
    parsed = parse_reason_rate_limit(text)
    return parsed[0] if parsed else None


def bucket_limit(key: str) -> int:
    """How many jobs of bucket `key` may run at once (the n in `"<n>:<label>"`)."""
    return int(key.split(":", 1)[0])


def buckets_of(reason_trails: Iterable[Iterable[Sequence[object]]]) -> set[str]:
    """Every bucket named by the reason trails of a job's opcodes (one trail per opcode)."""
    out: set[str] = set()
    for trail in reason_trails:
        for entry in trail:
            if len(entry) >= 2 and isinstance(entry[1], str):
                key = bucket_of(entry[1])
                if key is not None:
                    out.add(key)
    return out


def count_buckets(running_buckets: Iterable[Iterable[str]]) -> Counter[str]:
    """Running jobs per bucket, from each running job's buckets."""
    counts: Counter[str] = Counter()
    for buckets in running_buckets:
        counts.update(set(buckets))
    return counts


def full_bucket(buckets: Iterable[str], running: Mapping[str, int]) -> str | None:
    """The first (sorted) bucket of the job that has no free slot, or None if it may start.

    A job in no bucket always passes; a bucket already over its limit blocks only its own jobs.
    """
    for key in sorted(buckets):
        if running.get(key, 0) >= bucket_limit(key):
            return key
    return None


def count_rate_limit_rules(running_verdicts: Iterable[Verdict | None]) -> Counter[str]:
    """Running jobs per RATE_LIMIT rule uuid, from each running job's *current* verdict."""
    counts: Counter[str] = Counter()
    for v in running_verdicts:
        if v is not None and v.action == "RATE_LIMIT":
            counts[v.rule_uuid] += 1
    return counts


def rate_limit_allows(verdict: Verdict | None, running: Mapping[str, int]) -> bool:
    """Whether a job with this verdict passes its RATE_LIMIT rule (other verdicts: True)."""
    if verdict is None or verdict.action != "RATE_LIMIT":
        return True
    return running.get(verdict.rule_uuid, 0) < verdict.rate_limit


# -- pending_reason and result texts (docs/contracts.md#job-model) ---------------------


def paused_reason(rule_uuid: str) -> str:
    """pending_reason of a job a PAUSE rule applies to."""
    return f"paused by filter {rule_uuid}"


def rate_limited_reason(rule_uuid: str) -> str:
    """pending_reason of a job held by a RATE_LIMIT rule."""
    return f"rate-limited by filter {rule_uuid}"


def bucket_full_reason(key: str) -> str:
    """pending_reason of a job held by a full reason bucket."""
    return f"rate-limit bucket {key} full"


def rejected_result(rule_uuid: str) -> str:
    """Result of a job canceled because a REJECT rule applies to it."""
    return f"rejected by filter {rule_uuid}"


class Admission:
    """One scheduling pass's slot accounting for RATE_LIMIT rules and reason buckets.

    Pure bookkeeping: start it from the running jobs, then ask `try_start` for each candidate
    in order.  Unlike Ganeti (whose bucket stage runs before the filter stage), a job that is
    paused or held by a rule takes no bucket slot, and a job held by a bucket takes no rule
    slot: slots are taken only by jobs that really start.
    """

    __slots__ = ("buckets", "rules")

    def __init__(
        self,
        rules: Mapping[str, int] | None = None,
        buckets: Mapping[str, int] | None = None,
    ) -> None:
        self.rules: Counter[str] = Counter(rules or {})
        self.buckets: Counter[str] = Counter(buckets or {})

    @classmethod
    def from_running(cls, running: Iterable[tuple[Verdict | None, Iterable[str]]]) -> Admission:
        """Count the slots taken by running jobs: `(current verdict, buckets)` per job."""
        adm = cls()
        for verdict, buckets in running:
            adm.occupy(verdict, buckets)
        return adm

    def hold(self, verdict: Verdict | None, buckets: Iterable[str]) -> Hold | None:
        """What keeps a queued job from starting now (its rule, a full bucket, its
        RATE_LIMIT rule's slots), or None if it may."""
        if verdict is not None:
            uuid = verdict.rule_uuid
            if verdict.action == "PAUSE":
                return Hold("paused", paused_reason(uuid), key=uuid)
            if verdict.action == "REJECT":
                return Hold("rejected", rejected_result(uuid), key=uuid)
        full = full_bucket(buckets, self.buckets)
        if full is not None:
            return Hold("bucket", bucket_full_reason(full), key=full)
        if verdict is not None and not rate_limit_allows(verdict, self.rules):
            return Hold("rate_limit", rate_limited_reason(verdict.rule_uuid), key=verdict.rule_uuid)
        return None

    def hold_reason(self, verdict: Verdict | None, buckets: Iterable[str]) -> str | None:
        """Why a queued job may not start now (its pending_reason), or None if it may."""
        held = self.hold(verdict, buckets)
        return None if held is None else held.reason

    def occupy(self, verdict: Verdict | None, buckets: Iterable[str]) -> None:
        """Take the slots of a job that runs (or starts now)."""
        if verdict is not None and verdict.action == "RATE_LIMIT":
            self.rules[verdict.rule_uuid] += 1
        for key in set(buckets):
            self.buckets[key] += 1

    def try_start(self, verdict: Verdict | None, buckets: Iterable[str]) -> str | None:
        """`hold_reason`, and if the job may start, take its slots; None = start it."""
        buckets = tuple(buckets)
        reason = self.hold_reason(verdict, buckets)
        if reason is None:
            self.occupy(verdict, buckets)
        return reason
