"""What the filter chain decides for one job, and what holds a queued job back: the types
shared by the filter evaluator (luxid/filters) and the scheduler's selection step
(luxid/jobs), so neither imports the other.
"""

from __future__ import annotations

from typing import Literal

import msgspec

# CONTINUE never appears in a verdict: a CONTINUE rule never *applies*
# (docs/contracts.md#filters).
VerdictAction = Literal["ACCEPT", "PAUSE", "REJECT", "RATE_LIMIT"]


class Verdict(msgspec.Struct, frozen=True):
    """The first applying rule's action for a job; `rate_limit` is n for RATE_LIMIT n."""

    action: VerdictAction
    rule_uuid: str
    rate_limit: int = 0


HoldKind = Literal["dependency", "paused", "rejected", "bucket", "rate_limit", "slots", "budget"]


class Hold(msgspec.Struct, frozen=True):
    """Why a scheduling pass does not start a queued job: the structure behind its
    pending_reason (`reason`, the text), which `why_job` explains.

    `key` is the rule's uuid (paused, rejected, rate_limit), the reason bucket's key
    (bucket) or the budget's name (budget); `job_id` the dependency waited for (dependency).
    """

    kind: HoldKind
    reason: str
    key: str = ""
    job_id: int = 0
