"""The budget rule (pure): whether starting a job would disrupt more members of a budget
than it allows (docs/contracts.md#disruption-budgets).

A member is disrupted while it is down (the book) or while a started job runs a
disruptive opcode on it (`BudgetCount`, built from the jobs holding a slot and told of
each job a scheduling pass starts, so two jobs can never both take a budget's last
unit).  A job that would make more than `max_disrupted` members of a budget disrupted
is held, with the budget's reason; a job that carries `ignore_budgets: true`, or a
drain's failover or shutdown at its deadline, starts regardless and the budget records
that it was exceeded.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Final, Literal

from client.budgets import DISRUPTIVE_OPS
from luxid.budgets.book import BudgetBook
from luxid.filters.verdict import Hold
from luxid.jobs.model import Job

# The reason entry a drain's failovers and shutdowns at its deadline carry
# (luxid.drains.node.submit): source, and the start of its text.
DRAIN_REASON_SOURCE: Final = "lw:drain"
DEADLINE_REASON_PREFIX: Final = "deadline:"

Override = Literal["ignore_budgets", "deadline"]
Disruptions = tuple[tuple[tuple[str, str], ...], Override | None]
"""What `disruptions` says of a job: its (instance, OP_ID) pairs and its override."""


def disruptions(job: Job) -> Disruptions:
    """The (instance, OP_ID) pairs the job's disruptive opcodes name, and what lets it
    past a budget (None: nothing)."""
    found: list[tuple[str, str]] = []
    override: Override | None = None
    for op in job.ops:
        params = op.input
        op_id = params.get("OP_ID")
        if op_id not in DISRUPTIVE_OPS:
            continue
        name = params.get("instance_name")
        if isinstance(name, str):
            found.append((name, op_id))
        if params.get("ignore_budgets") is True:
            override = "ignore_budgets"
        elif override is None and _at_deadline(params.get("reason")):
            override = "deadline"
    return tuple(found), override


class DisruptionMemo:
    """`disruptions` of each job, computed once: a job's opcodes never change after its
    submit, and a pass asks for every queued job.  The owner forgets finalized jobs."""

    def __init__(self) -> None:
        self._known: dict[int, Disruptions] = {}

    def __call__(self, job: Job) -> Disruptions:
        known = self._known.get(job.id)
        if known is None:
            known = self._known[job.id] = disruptions(job)
        return known

    def forget(self, job_id: int) -> None:
        self._known.pop(job_id, None)


def _at_deadline(reason: object) -> bool:
    """Whether a reason trail marks a drain's move at its deadline."""
    if not isinstance(reason, list):
        return False
    return any(
        isinstance(entry, list | tuple)
        and len(entry) >= 2
        and entry[0] == DRAIN_REASON_SOURCE
        and isinstance(entry[1], str)
        and entry[1].startswith(DEADLINE_REASON_PREFIX)
        for entry in reason
    )


def budget_reason(name: str, max_disrupted: int, disrupted: Sequence[tuple[str, str]]) -> str:
    """`budget web: 1 of 1 disrupted (web2: job 41 OP_INSTANCE_MIGRATE)`."""
    text = f"budget {name}: {len(disrupted)} of {max_disrupted} disrupted"
    if not disrupted:
        return text
    return text + " (" + ", ".join(f"{inst}: {why}" for inst, why in disrupted) + ")"


def exceeded_message(name: str, job_id: int, override: Override) -> str:
    """`budget web exceeded by job 57 (deadline)`."""
    return f"budget {name} exceeded by job {job_id} ({override})"


class BudgetCount:
    """The disrupted members of every budget at one moment of a scheduling pass."""

    def __init__(
        self, book: BudgetBook, started: Iterable[Job], memo: DisruptionMemo | None = None
    ) -> None:
        self.book = book
        self._of = memo or disruptions
        self._by_job: dict[str, dict[str, str]] = {}  # budget -> member -> "job N OP_ID"
        self._count = {name: len(down) for name, down in book.down.items()}
        self._listed: dict[str, list[tuple[str, str]]] = {}  # cache of `disrupted`
        self._reasons: dict[str, str] = {}  # cache of `reason`
        self._holds: dict[str, Hold] = {}  # cache of the Hold each budget gives (one per pass)
        for job in started:
            self._add(f"job {job.id}", self._of(job)[0])

    def count(self, name: str) -> int:
        """How many members of budget `name` are disrupted now."""
        return self._count[name]

    def disrupted(self, name: str) -> list[tuple[str, str]]:
        """[member, why] of budget `name`'s disrupted members, in name order; why is
        `job N OP_ID` or `down`."""
        listed = self._listed.get(name)
        if listed is None:
            by_job = self._by_job.get(name, {})
            members = sorted(self.book.down[name] | by_job.keys())
            listed = self._listed[name] = [(m, by_job.get(m, "down")) for m in members]
        return listed

    def reason(self, name: str) -> str:
        """The pending_reason of a job budget `name` holds."""
        reason = self._reasons.get(name)
        if reason is None:
            reason = budget_reason(name, self.book.limits[name], self.disrupted(name))
            self._reasons[name] = reason
        return reason

    def hold(self, job: Job) -> Hold | None:
        """The budget that holds `job` now (the first by name), or None."""
        found, override = self._of(job)
        if not found or override is not None:
            return None
        if len(found) == 1:  # the common case, without building sets
            name = self.held_by(found[0][0])
            return None if name is None else self._hold(name)
        for name, new in self._new_members(found):
            if self._count[name] + new > self.book.limits[name]:
                return self._hold(name)
        return None

    def _hold(self, name: str) -> Hold:
        hold = self._holds.get(name)
        if hold is None:
            hold = self._holds[name] = Hold("budget", self.reason(name), key=name)
        return hold

    def held_by(self, inst: str) -> str | None:
        """The budget (the first by name) that would hold a disruptive job on `inst` now,
        or None (a drain asks this before it submits a move)."""
        limits, count = self.book.limits, self._count
        for name in self.book.of_instance.get(inst, ()):
            if count[name] >= limits[name] and not self._disrupted(name, inst):
                return name
        return None

    def plan(self, inst: str, op_id: str) -> None:
        """Count a disruptive job on `inst` that a drain decided to submit as started, so
        the rest of its pass judges by it."""
        self._add("planned", ((inst, op_id),))

    def _disrupted(self, name: str, inst: str) -> bool:
        return inst in self.book.down[name] or inst in self._by_job.get(name, ())

    def start(self, job: Job) -> list[tuple[str, str]]:
        """Count `job` as started; (budget, event) for each budget it exceeded (only a job
        with an override can)."""
        found, override = self._of(job)
        if not found:
            return []
        exceeded: list[tuple[str, str]] = []
        if override is not None:
            for name, new in self._new_members(found):
                if self._count[name] + new > self.book.limits[name]:
                    exceeded.append((name, exceeded_message(name, job.id, override)))
        self._add(f"job {job.id}", found)
        return exceeded

    def _new_members(self, found: Sequence[tuple[str, str]]) -> list[tuple[str, int]]:
        """(budget, how many members `found` would newly disrupt), budgets by name."""
        new: dict[str, set[str]] = {}
        for inst, _ in found:
            for name in self.book.of_instance.get(inst, ()):
                if not self._disrupted(name, inst):
                    new.setdefault(name, set()).add(inst)
        return sorted((name, len(insts)) for name, insts in new.items())

    def _add(self, label: str, found: Sequence[tuple[str, str]]) -> None:
        """Count `found` as disrupted by the job `label` names (`job 41`)."""
        of_instance = self.book.of_instance
        for inst, op_id in found:
            for name in of_instance.get(inst, ()):
                by_job = self._by_job.setdefault(name, {})
                if inst in by_job:
                    continue
                by_job[inst] = f"{label} {op_id}"
                if inst not in self.book.down[name]:
                    self._count[name] += 1
                self._listed.pop(name, None)
                self._reasons.pop(name, None)
                self._holds.pop(name, None)
