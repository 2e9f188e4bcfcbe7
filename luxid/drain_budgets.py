"""The disruption budgets as luxid's drains ask them (docs/contracts.md#disruption-budgets):
the scheduler's own rule over its budget book, so a drain judges a move exactly as the
scheduler will judge its job.

A drain asks before it submits a move (`gate`): the jobs started, and every drain's moves
submitted and not started yet, count as disruptions, so two drains never both submit the
move that would take a budget's last unit.  A status shows a held move with its budget's
reason as it is now (`reason`); a plan is paced by the budgets as they are now
(`plan_budgets`).
"""

from __future__ import annotations

from collections.abc import Iterable

from luxid.budgets import BudgetCount, disruptions
from luxid.drains import DrainRecord
from luxid.drains.node import MOVES
from luxid.drains.plan import PlanBudget
from luxid.drains.record import FINALIZED, held_budget
from luxid.drains.status import BudgetReason
from luxid.jobs import is_finalized, job_status
from luxid.queue import Queue


class DrainBudgets:
    """The budget rule for the drains, over the queue's scheduler."""

    def __init__(self, queue: Queue) -> None:
        self.queue = queue

    def gate(self, records: Iterable[DrainRecord]) -> BudgetCount | None:
        """The rule with every drain's submitted, unstarted moves of `records` counted;
        None without budgets."""
        scheduler = self.queue.scheduler
        if not scheduler.budgets:
            return None
        started = scheduler.running()
        slots = {job.id for job in started}
        submitted = [
            job
            for record in records
            for entry in record.active
            if entry.kind in MOVES and entry.id not in slots
            for job in (self.queue.get(entry.id),)
            if job is not None and not is_finalized(job)
        ]
        return scheduler.budget_count([*started, *submitted])

    def reason(self, records: Iterable[DrainRecord]) -> BudgetReason:
        """Why each budget holds a drain's move now (for a status)."""
        gate = self.gate(records)
        if gate is None:
            return lambda name: None
        return lambda name: gate.reason(name) if name in gate.book.limits else None

    def plan_budgets(self) -> list[PlanBudget]:
        """The budgets as the scheduler judges by them now, for a plan."""
        scheduler = self.queue.scheduler
        count = scheduler.budget_count(scheduler.running())
        if count is None:
            return []
        book = count.book
        return [
            PlanBudget(
                name=name,
                max_disrupted=book.limits[name],
                members=frozenset(book.members[name]),
                reason=count.reason(name),
            )
            for name in sorted(book.budgets)
        ]

    def holds_a_move(self, records: Iterable[DrainRecord]) -> bool:
        """Whether a budget holds a move of some drain in progress (asked on every job
        change: without budgets, at once)."""
        return bool(self.queue.scheduler.budgets) and any(
            r.status == "draining" and any(held_budget(b) for b in r.blocked.values())
            for r in records
        )

    def freed(self, job_id: int) -> bool:
        """Whether job `job_id` ended a disruption (or is gone): a budget may let a held
        move go now."""
        job = self.queue.get(job_id)
        return job is None or (job_status(job) in FINALIZED and bool(disruptions(job)[0]))
