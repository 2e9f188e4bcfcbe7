"""A drain's `DrainStatus` (docs/contracts.md#drain-methods), computed from its record, the
view and its jobs."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final

from client.api.luxi import DrainStatus
from client.vocabulary import CANCELING, RUNNING, WAITING
from luxid.drains.moves import remaining
from luxid.drains.progress import JobFacts
from luxid.drains.record import Blocked, DrainRecord, held_budget
from luxid.drains.view import ClusterView

# A job that has started and not ended: its process runs, whether it waits for locks yet.
_STARTED: Final = frozenset({WAITING, RUNNING, CANCELING})


def _running(record: DrainRecord, jobs: Mapping[int, JobFacts]) -> int:
    """How many of the drain's jobs have started and not ended."""
    count = 0
    for job in record.active:
        facts = jobs.get(job.id)
        status = facts.status if facts is not None else job.status
        count += status in _STARTED
    return count


BudgetReason = Callable[[str], str | None]
"""The reason a disruption budget (by name) holds a move now; None: no such budget."""


def _why(blocked: Blocked, budget_reason: BudgetReason) -> str:
    """Why an instance is blocked: a budget's reason as it is now, else the stored one."""
    budget = held_budget(blocked)
    return (budget_reason(budget) if budget is not None else None) or blocked.reason


def drain_status(
    record: DrainRecord,
    view: ClusterView,
    jobs: Mapping[int, JobFacts],
    budget_reason: BudgetReason = lambda name: None,
) -> DrainStatus:
    """The status of one drain.

    For a node: `total` = the instances it moved plus those still to move, `remaining` =
    the latter, `blocked` = those that cannot move now and why (a budget's why as
    `budget_reason` gives it now).  For the queue: `total` = the jobs it waits for,
    `remaining` = those unfinished.  `running` counts the drain's jobs that have started
    and not ended (waiting for locks, running or canceling).
    """
    if record.is_node:
        left = remaining(record, view)
        total = len(set(record.moved)) + len(left)
        waiting = set(left)
        blocked: list[list[str | int]] = [
            [name, _why(b, budget_reason)]
            for name, b in sorted(record.blocked.items())
            if name in waiting
        ]
        count = len(left)
    else:
        total = record.total
        count = len(record.active)
        blocked = []
    return DrainStatus(
        target=record.target,
        status=record.status,
        started_at=record.started_at,
        start_at=record.start_at,
        updated_at=record.updated_at,
        deadline=record.deadline,
        max_parallel=record.max_parallel,
        mode=record.mode,
        message=record.message,
        deadline_reached=record.deadline_reached,
        completed_at=record.completed_at,
        total=total,
        remaining=count,
        running=_running(record, jobs),
        blocked=blocked,
        shut_down=list(record.shut_down),
        jobs=[job.id for job in record.all_jobs()],
    )
