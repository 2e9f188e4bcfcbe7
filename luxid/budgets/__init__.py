"""Disruption budgets in luxid (docs/contracts.md#disruption-budgets): pure code.

`book` builds the budgets' members from the configuration; `rule` decides whether a job
may start under them, counting the jobs started so far.  The scheduler's selection step
(luxid.jobs.selection) asks the rule for every queued job it would start, and the drains
ask the same rule before they submit a move, so one rule holds every entry point.
"""

from luxid.budgets.book import EMPTY_BOOK, BudgetBook, InstanceFacts, build_book, instance_facts
from luxid.budgets.rule import (
    BudgetCount,
    DisruptionMemo,
    Override,
    budget_reason,
    disruptions,
    exceeded_message,
)

__all__ = [
    "EMPTY_BOOK",
    "BudgetBook",
    "BudgetCount",
    "DisruptionMemo",
    "InstanceFacts",
    "Override",
    "budget_reason",
    "build_book",
    "disruptions",
    "exceeded_message",
    "instance_facts",
]
