"""One decision pass over every node drain (docs/contracts.md#node-drain): what to submit or
cancel now.

`step` takes every drain record, the cluster view, the facts of the drains' jobs and
`now`, and returns the new records and the effects to apply.  The shell runs it whenever
something it depends on may have changed — a drain job changed status, the configuration
changed, a deadline timer fired, an operator started, updated or canceled a drain, a
submit was recorded — and never on a timer alone.

A scheduled drain whose start time came starts first (`schedule.start_due`); one still
scheduled does nothing.  Per draining node, in order:

1. the OP_NODE_SET_PARAMS `drained: true` job first; nothing moves before it ended;
2. at the deadline (once): cancel the drain's queued and waiting jobs;
3. before the deadline: one OP_INSTANCE_MIGRATE job per instance on the node, at most
   `max_parallel` unfinished at once, each to the node placement chose on the view with
   every move under way counted as done, never to a node being drained; an instance with
   no room is reported blocked and tried again only when the room on the cluster changed
   (its capacity key differs), never in a loop; an instance whose move a disruption
   budget would hold now (`BudgetGate`, the scheduler's rule with every drain's
   submitted moves counted) is reported blocked by that budget, and the drain goes on
   with other instances; it is asked again in every pass;
4. after the deadline: OP_INSTANCE_FAILOVER for every instance still there (no limit),
   OP_INSTANCE_SHUTDOWN for one that no node can take (or whose failover failed);
5. complete when no instance is left (or, after the deadline, nothing more can be done)
   and no drain job is unfinished.

A canceled drain cancels its queued and waiting jobs and, unless kept drained, submits the
OP_NODE_SET_PARAMS `drained: false` job.  No instance gets a job while another job of any
drain for it is unfinished, and an instance a drain moved is not moved again by it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final, Protocol

import msgspec

from luxid.drains.effects import CancelJob, Effect
from luxid.drains.node import MOVES, submit
from luxid.drains.progress import JobFacts, refresh
from luxid.drains.record import (
    Blocked,
    DrainRecord,
    budget_blocked,
    held_budget,
    touched,
    with_events,
)
from luxid.drains.schedule import start_due
from luxid.drains.view import ClusterView, NoRoom, Placement, capacity_key

MIGRATE_OP: Final = "OP_INSTANCE_MIGRATE"
# An event names at most this many instances a budget newly holds (`… and 970 more`).
HELD_NAMED: Final = 5


class BudgetGate(Protocol):
    """The disruption budgets' rule as a drain asks it before submitting a move
    (luxid.budgets.BudgetCount)."""

    def held_by(self, inst: str) -> str | None:
        """The budget that would hold a move of `inst` now, or None."""

    def reason(self, name: str) -> str:
        """Why budget `name` holds a move now (`budget web: 1 of 1 disrupted (…)`)."""

    def plan(self, inst: str, op_id: str) -> None:
        """Count a move of `inst` just decided as a disruption."""


class Planner:
    """Placement over the view as it will be once the planned moves are done."""

    def __init__(self, view: ClusterView, exclude: frozenset[str], place: Placement) -> None:
        self.view = view
        self.exclude = exclude
        self._place = place
        self._key: str | None = None

    @property
    def key(self) -> str:
        """The capacity key of the planned view (computed when first needed)."""
        if self._key is None:
            self._key = capacity_key(self.view)
        return self._key

    def place(self, instance: str, source: str) -> str:
        """A node for `instance` (not `source`, not a draining node); raises NoRoom."""
        return self._place(self.view, instance, self.exclude | {source})

    def move(self, instance: str, target: str) -> None:
        """Count a move just decided as done."""
        self.view = self.view.with_moves([(instance, target)])
        self._key = None


def cluster_planner(records: Iterable[DrainRecord], view: ClusterView, place: Placement) -> Planner:
    """Placement as a pass sees it: every node drain's move under way counted as done, no
    draining node a target.  The drain's pass and its dry run (`plan`) share it, so a plan
    places each instance where the drain would."""
    nodes = [r for r in records if r.is_node]
    under_way = [
        (job.instance, job.node)
        for r in nodes
        for job in r.active
        if job.kind in MOVES and job.instance and job.node
    ]
    draining = frozenset(r.node for r in nodes if r.status == "draining")
    return Planner(view.with_moves(under_way), draining, place)


def remaining(record: DrainRecord, view: ClusterView) -> list[str]:
    """The instances still to take off the node: on it in the view and not moved by the
    drain already (a view older than the move's end still shows them there)."""
    moved = set(record.moved)
    return [name for name in view.on_node(record.node) if name not in moved]


def _cancels(record: DrainRecord, kinds: frozenset[str]) -> tuple[DrainRecord, list[Effect]]:
    """Cancel the drain's queued and waiting jobs of `kinds` (each once)."""
    ids = [
        job.id
        for job in record.active
        if job.kind in kinds
        and job.status in ("queued", "waiting")
        and job.id not in record.cancel_sent
    ]
    if not ids:
        return record, []
    record = msgspec.structs.replace(record, cancel_sent=(*record.cancel_sent, *ids))
    return record, [CancelJob(target=record.target, job_id=i) for i in ids]


def _held_events(held: Mapping[str, list[str]], gate: BudgetGate) -> list[str]:
    """One event per budget that newly holds instances: `web3, web4: held by budget web:
    1 of 1 disrupted (…)`."""
    events = []
    for budget, names in sorted(held.items()):
        shown = ", ".join(names[:HELD_NAMED])
        if len(names) > HELD_NAMED:
            shown += f" and {len(names) - HELD_NAMED} more"
        events.append(f"{shown}: held by {gate.reason(budget)}")
    return events


def _migrations(
    record: DrainRecord,
    view: ClusterView,
    left: list[str],
    now: float,
    plan: Planner,
    busy: set[str],
    gate: BudgetGate | None,
) -> tuple[DrainRecord, list[Effect]]:
    """Start moves while fewer than max_parallel are unfinished, none past a budget."""
    room = record.max_parallel - sum(1 for job in record.active if job.kind == "migrate")
    effects: list[Effect] = []
    blocked = dict(record.blocked)
    events: list[str] = []
    held: dict[str, list[str]] = {}  # budget -> the instances it newly holds
    if gate is None:  # no budgets: none holds anything, and the pass stops at max_parallel
        blocked = {n: b for n, b in blocked.items() if held_budget(b) is None}
    for name in left:
        if room <= 0 and gate is None:
            break
        if name in busy:
            continue
        before = blocked.get(name)
        budget = None if gate is None else gate.held_by(name)
        if budget is not None:  # listed whether or not max_parallel has room
            blocked[name] = budget_blocked(budget)
            if before is None or held_budget(before) != budget:
                held.setdefault(budget, []).append(name)
            continue
        if before is not None and held_budget(before) is not None:
            before = blocked.pop(name)  # no budget holds it now
        if room <= 0:
            continue
        if before is not None and before.key == plan.key:
            continue  # nothing changed that could give it room
        try:
            target = plan.place(name, record.node)
        except NoRoom as exc:
            blocked[name] = Blocked(reason=exc.message, key=plan.key)
            if before is None:
                events.append(f"{name}: blocked: {exc.message}")
            continue
        blocked.pop(name, None)
        effects.append(submit(record, "migrate", now, instance=name, node=target))
        plan.move(name, target)
        if gate is not None:
            gate.plan(name, MIGRATE_OP)
        busy.add(name)
        room -= 1
    if gate is not None:
        events += _held_events(held, gate)
    record = msgspec.structs.replace(record, blocked=blocked)
    return with_events(record, now, *events), effects


def _deadline_moves(
    record: DrainRecord,
    view: ClusterView,
    left: list[str],
    now: float,
    plan: Planner,
    busy: set[str],
    gate: BudgetGate | None,
) -> tuple[DrainRecord, list[Effect]]:
    """Fail over every instance still there; shut down what no node takes.

    Each instance gets at most one failover and one shutdown; one that was shut down
    stays, and placement is asked again only when the room changed.  Budgets do not hold
    them (`gate` is not asked): the deadline goes past them, and the budgets record it.
    """
    tried = {(job.kind, job.instance) for job in record.all_jobs()}
    effects: list[Effect] = []
    events: list[str] = []
    blocked = dict(record.blocked)
    for name in left:
        if name in busy:
            continue
        if ("failover", name) not in tried and ("shutdown", name) not in tried:
            # Every instance gets a failover try at the deadline, whatever blocked it before.
            before = blocked.get(name)
            if before is None or not before.at_deadline or before.key != plan.key:
                try:
                    target = plan.place(name, record.node)
                except NoRoom as exc:
                    blocked[name] = Blocked(reason=exc.message, key=plan.key, at_deadline=True)
                    events.append(f"{name}: no node can take it: {exc.message}")
                else:
                    blocked.pop(name, None)
                    effects.append(submit(record, "failover", now, instance=name, node=target))
                    plan.move(name, target)
                    busy.add(name)
                    continue
        if view.instances[name].admin_state == "up" and ("shutdown", name) not in tried:
            effects.append(submit(record, "shutdown", now, instance=name))
            busy.add(name)
    record = msgspec.structs.replace(record, blocked=blocked)
    return with_events(record, now, *events), effects


def _complete(record: DrainRecord, now: float, message: str) -> DrainRecord:
    done = msgspec.structs.replace(record, status="complete", completed_at=now, blocked={})
    return with_events(done, now, message)


def _draining(
    record: DrainRecord,
    view: ClusterView,
    now: float,
    plan: Planner,
    busy: set[str],
    gate: BudgetGate | None,
) -> tuple[DrainRecord, list[Effect]]:
    effects: list[Effect] = []
    if record.deadline is not None and now >= record.deadline and not record.deadline_reached:
        record = msgspec.structs.replace(record, deadline_reached=True)
        record, effects = _cancels(record, MOVES)
        record = with_events(
            record, now, f"deadline passed: {len(effects)} queued migration jobs canceled"
        )
    if any(job.kind == "drained" for job in record.active):
        return record, effects
    if not any(job.kind == "drained" for job in record.done):
        return record, [*effects, submit(record, "drained", now)]
    left = remaining(record, view)
    decide = _deadline_moves if record.deadline_reached else _migrations
    record, more = decide(record, view, left, now, plan, busy, gate)
    effects += more
    if effects or record.active:
        return record, effects
    if record.deadline_reached:
        failed_over = sum(1 for j in record.done if j.kind == "failover" and j.status == "success")
        return _complete(
            record,
            now,
            f"deadline reached: {failed_over} instances failed over, "
            f"{len(record.shut_down)} shut down",
        ), []
    if not left:
        return _complete(record, now, "all instances moved; drain complete"), []
    return record, []


def _ended(record: DrainRecord, now: float) -> tuple[DrainRecord, list[Effect]]:
    """A canceled or complete drain: cancel what is queued (canceled only) and undrain."""
    effects: list[Effect] = []
    if record.status == "canceled":
        record, effects = _cancels(record, MOVES | {"drained"})
    undrains = [job for job in record.all_jobs() if job.kind == "undrained"]
    if record.undrain and not undrains:
        effects.append(submit(record, "undrained", now))
    return record, effects


def step(
    records: Mapping[str, DrainRecord],
    view: ClusterView,
    jobs: Mapping[int, JobFacts],
    now: float,
    place: Placement,
    budgets: BudgetGate | None = None,
) -> tuple[dict[str, DrainRecord], list[Effect]]:
    """One pass over the node drains among `records`; the other records are returned as
    they are.  `jobs` must hold the facts of every unfinished job the records list, and
    `view` must be at least as new as the ends of those jobs.  `budgets` is the budget
    rule with every disruption started or submitted counted (None: no budgets); the pass
    counts its own moves in it as it decides them."""
    # A scheduled drain whose time came starts first, so that it is no target of moves.
    fresh = {
        t: start_due(refresh(r, jobs, now), now) if r.is_node else r for t, r in records.items()
    }
    nodes = [r for r in fresh.values() if r.is_node]
    busy = {job.instance for r in nodes for job in r.active if job.instance}
    plan = cluster_planner(nodes, view, place)
    out: dict[str, DrainRecord] = {}
    effects: list[Effect] = []
    for target in sorted(fresh):
        record = fresh[target]
        if record.is_node:
            # A move that just failed waits for the room to change from here on.
            unkeyed = {k: b for k, b in record.blocked.items() if b.key is None}
            if unkeyed:
                keyed = {k: Blocked(reason=b.reason, key=plan.key) for k, b in unkeyed.items()}
                record = msgspec.structs.replace(record, blocked={**record.blocked, **keyed})
            if record.status == "draining":
                record, more = _draining(record, view, now, plan, busy, budgets)
                effects += more
            elif record.status != "scheduled":  # a scheduled one waits for its timer
                record, more = _ended(record, now)
                effects += more
        out[target] = touched(records[target], record, now)
    return out, effects
