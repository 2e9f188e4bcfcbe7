"""What the filter chain decides for one job: the type shared by the filter evaluator
(luxid/filters) and the scheduler's selection step (luxid/jobs), so neither imports the other.
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
