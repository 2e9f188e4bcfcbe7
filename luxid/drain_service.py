"""luxid's drain shell (docs/contracts.md#drains): runs the pure core of luxid.drains on
events and does what it says by plain calls to the parts that own each thing: a drain's jobs
are submitted, canceled and reprioritized through the queue (luxid.queue.Queue, checked by
luxid.job_check as any job), the queue drain's rule is written through
luxid.filter_writes, and the records are kept in wconfd through luxid.wconfd_link.
luxid.term builds the service and connects the two events it follows.

One decision path, event-driven, on the event loop:

- a pass runs when a drain job changes status (`jobs_changed`, told by the queue), a
  disruptive job ends while a budget holds a drain's move, the configuration changes
  (`config_changed`), an operator calls a drain method, a deadline timer fires, and once
  more after effects were carried out; never on a timer alone.  Requests made while a
  pass runs coalesce into one more, passes for job events are at least PASS_SPACING
  apart (a due deadline does not wait), and only passes for which the configuration may
  have changed read it again.
- a pass gathers the facts of the drains' jobs *before* reading the configuration (the
  view is at least as new as every job end it is fed with); runs `moves.step` over the
  node drains, with the budget rule as the scheduler applies it (luxid.drain_budgets),
  and `queue_drain.step` over the queue drain; carries out the effects in order and
  reports each back to the core; only then writes the changed records to wconfd, so a
  crash in between leaves jobs that the next start finds again by their `lw:drain-job`
  reason (`node.adopt_jobs`).
- after each write the drain's followers (`wait_for_drain_change`) are woken and its next
  timer is put in the heap; one event-loop timer is armed for the earliest.  Deadlines
  are absolute, so a restarted luxid fires a past one at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from typing import get_args

import msgspec

from client import errors
from client._server.metrics import Registry
from client.api.luxi import DrainChange, DrainPlan, DrainStatus
from luxid.drain_budgets import DrainBudgets
from luxid.drains import (
    QUEUE_TARGET,
    CancelJob,
    ChangePriority,
    ClusterView,
    DeadlineHeap,
    DrainRecord,
    Effect,
    JobFacts,
    PutFilter,
    Submit,
    drain_status,
    events_since,
    moves,
    next_timer,
    node,
    node_target,
    queue_drain,
    view_from_config,
)
from luxid.drains.node import tagged_jobs
from luxid.drains.plan import plan_node_drain
from luxid.drains.progress import job_facts
from luxid.drains.record import (
    DRAIN_KILL_GRACE,
    FINALIZED,
    Mode,
    Status,
    check_target,
    may_act,
    with_events,
)
from luxid.drains.view import place
from luxid.events import drain_event
from luxid.filter_writes import FilterWrites
from luxid.job_check import check_job
from luxid.jobs import is_finalized, job_status
from luxid.queue import MAX_WAIT, Queue
from luxid.wconfd_link import RETRY_MAX, RETRY_MIN, WconfdLink

log = logging.getLogger(__name__)

# The least time between two passes made for job events (see `_run`).
PASS_SPACING = 0.1
Change = Callable[[dict[str, DrainRecord], ClusterView, float], list[Effect]]


class DrainService:
    """The drains of this luxid: records, timer heap, passes and the drain methods."""

    def __init__(
        self,
        queue: Queue,
        link: WconfdLink,
        filter_writes: FilterWrites,
        metrics: Registry,
        *,
        kill_after: float = DRAIN_KILL_GRACE,
    ) -> None:
        self.queue = queue  # the drains' jobs: submitted, canceled, reprioritized there
        self.link = link  # the drain records and the configuration, in wconfd
        self.filter_writes = filter_writes  # the queue drain's rule
        self.metrics = metrics
        self.budgets = DrainBudgets(queue)  # the budget rule, as the scheduler applies it
        self.kill_after = kill_after  # a queue drain's deadline: when to kill
        self.records: dict[str, DrainRecord] = {}
        self.view = ClusterView(nodes={}, instances={})
        self.heap = DeadlineHeap()
        self.ready = asyncio.Event()
        self._lock = asyncio.Lock()
        self._tracked: dict[int, str] = {}  # the drains' unfinished jobs: last seen status
        self._wanted = False
        self._stale = True  # the view may be older than the configuration
        self._hurry = asyncio.Event()  # a deadline is due: no coalescing delay
        self._runner: asyncio.Task[None] | None = None
        self._opener: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._changed: dict[str, asyncio.Future[None]] = {}
        self._notes: dict[str, list[str]] = {}  # events for a drain's next write

    # -- life cycle ----------------------------------------------------------------------

    def start(self) -> None:
        """Load the drains in the background (wconfd may not answer yet), then resume."""
        self._opener = asyncio.get_running_loop().create_task(self._open())

    async def _open(self) -> None:
        delay = RETRY_MIN
        while True:
            try:
                stored = await self.link.list_drains()
                # Before the first query: a status is computed on the view.
                await self._read_view()
                break
            except errors.RpcError as exc:
                log.warning("cannot read the drains: %s; retrying", exc.message)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
        now = time.time()
        tagged = tagged_jobs(self.queue.jobs())
        for obj in stored:
            record = msgspec.convert(obj, DrainRecord)
            if record.is_node:
                record = node.adopt_jobs(record, tagged, now)
            self.records[record.target] = record
            self.heap.set(record.target, next_timer(record))
        self._track()
        self.ready.set()
        log.info("drains resumed: %d records", len(self.records))
        self.request()

    async def close(self) -> None:
        """Stop the timer and the background work."""
        if self._timer is not None:
            self._timer.cancel()
        for task in (self._opener, self._runner):
            if task is not None:
                task.cancel()
                await asyncio.gather(task, return_exceptions=True)

    # -- events --------------------------------------------------------------------------

    def jobs_changed(self, ids: Iterable[int]) -> None:
        """Jobs changed (durably): a pass if a drain's job has a new status (one that
        ended may have changed the configuration: that pass reads it again), or if a job
        that ended may let a move a budget holds go."""
        changed = False
        held = self.budgets.holds_a_move(self.records.values())
        for job_id in ids:
            seen = self._tracked.get(job_id)
            if seen is None:
                changed = changed or (held and self.budgets.freed(job_id))
                continue
            job = self.queue.get(job_id)
            status = None if job is None else job_status(job)
            if status != seen:
                changed = True
                self._stale = self._stale or status is None or status in FINALIZED
        if changed:
            self.request()

    def budget_exceeded(self, starts: Iterable[tuple[str, int, str]]) -> None:
        """Jobs started past a budget: each event also goes to the job's drain."""
        # By the job's `lw:drain-job` tag: it may start before its drain recorded it.
        jobs = (self.queue.get(job_id) for _, job_id, _ in starts)
        tags = tagged_jobs(job for job in jobs if job is not None)
        for _, job_id, text in starts:
            if job_id in tags:
                self._notes.setdefault(tags[job_id].split(" ")[0], []).append(text)
                self.request()

    def config_changed(self) -> None:
        """The configuration changed: a pass if some drain may act on it.  A drain with
        jobs under way is passed over: the end of each of its jobs runs a pass that
        reads the configuration anyway (this keeps its own moves' writes from doubling
        the passes); one that waits for room or has nothing under way is not."""
        if any(may_act(r) and (r.blocked or not r.active) for r in self.records.values()):
            self._stale = True
            self.request()

    def request(self) -> None:
        """Ask for a pass; requests made while one runs lead to one more."""
        self._wanted = True
        if self.ready.is_set() and (self._runner is None or self._runner.done()):
            self._runner = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        while self._wanted:
            self._wanted = False
            began = loop.time()
            try:
                async with self._lock:
                    await self._pass([])
            except errors.RpcError as exc:
                log.warning("drain pass failed: %s; trying again", exc.message)
                await asyncio.sleep(RETRY_MIN)
                self._wanted = True
            if self._wanted and not self._hurry.is_set():
                # The job events of a busy drain coalesce: a pass at most every
                # PASS_SPACING s, so that its record (which grows with its history) is
                # not rewritten for each of them.  A deadline does not wait.
                with contextlib.suppress(TimeoutError):
                    spacing = max(0.0, began + PASS_SPACING - loop.time())
                    await asyncio.wait_for(self._hurry.wait(), spacing)
            self._hurry.clear()

    def _fire(self) -> None:
        self._timer = None
        if self.heap.pop_due(time.time()):
            self._stale = True
            self._hurry.set()
            self.request()
        else:
            self._arm()

    def _arm(self) -> None:
        when = self.heap.peek()
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if when is not None:
            loop = asyncio.get_running_loop()
            self._timer = loop.call_at(loop.time() + max(0.0, when - time.time()), self._fire)

    # -- the pass ------------------------------------------------------------------------

    def _facts(self) -> dict[int, JobFacts]:
        jobs = (self.queue.find(job.id) for r in self.records.values() for job in r.active)
        return {job.id: job_facts(job) for job in jobs if job is not None}

    async def _read_view(self) -> ClusterView:
        self._stale = False  # a change from now on needs another read
        self.view = view_from_config(await self.link.get_config())
        return self.view

    async def _pass(
        self, effects: list[Effect], changed: dict[str, DrainRecord] | None = None
    ) -> None:
        """One decision pass (under the lock) over the records, or `changed` ones (an
        operator call's, not written yet) with its `effects` carried out first."""
        jobs = self._facts()  # before the view: the view is at least as new as them
        # Read the configuration when it may have changed for the drains (a drain job
        # ended, a configuration change or a timer asked for the pass); a pass for a job
        # that only started, or for recording effects, plans on the last view.
        view = await self._read_view() if self._stale or changed is not None else self.view
        now = time.time()
        base = dict(self.records if changed is None else changed)
        notes, self._notes = self._notes, {}
        for target, texts in notes.items():
            if target in base:
                base[target] = with_events(base[target], now, *texts)
        records, more = moves.step(
            base, view, jobs, now, place, self.budgets.gate(self.records.values())
        )
        queued = records.get(QUEUE_TARGET)
        if queued is not None:
            records[QUEUE_TARGET], extra = queue_drain.step(queued, jobs, now, self.kill_after)
            more += extra
        effects = effects + more
        records = await self._carry_out(records, effects, now)
        await self._store(records)
        if effects:
            self._wanted = True  # again, now that the effects are recorded

    async def _carry_out(
        self, records: dict[str, DrainRecord], effects: list[Effect], now: float
    ) -> dict[str, DrainRecord]:
        """Do the effects in order, each reported to its drain's record."""
        for effect in effects:
            records[effect.target] = await self._do(records[effect.target], effect, now)
        return records

    async def _do(self, record: DrainRecord, effect: Effect, now: float) -> DrainRecord:
        if isinstance(effect, Submit):
            try:
                # Checked as any job, but not refused by the queue's drain flag.
                check_job(effect.ops)
                (job,) = await self.queue.submit([effect.ops], internal=True)
            except errors.RpcError as exc:
                log.warning("%r: cannot submit %s: %r", effect.target, effect.tag, exc.message)
                return node.submit_refused(record, effect, exc.message, now)
            return node.record_submitted(record, effect, job.id, now)
        if isinstance(effect, PutFilter):
            rule = await self.filter_writes.put(
                effect.uuid, 0, effect.predicates, effect.action, effect.reason
            )
            unfinished = [
                job.id
                for job in self.queue.jobs()
                if job.id <= rule.watermark and not is_finalized(job)
            ]
            return queue_drain.filter_set(record, rule.watermark, unfinished, now)
        with contextlib.suppress(errors.NotFound):  # archived or removed meanwhile
            if isinstance(effect, CancelJob):
                await self.queue.cancel(effect.job_id, effect.kill)
            elif isinstance(effect, ChangePriority):
                await self.queue.change_priority(effect.job_id, effect.priority)
            else:
                await self.filter_writes.drop(effect.uuid)
        return record

    async def _store(self, records: dict[str, DrainRecord]) -> None:
        """Write the changed records, wake their followers, set their timers."""
        for target, record in records.items():
            old = self.records.get(target)
            if old is not None and record == old and record.serial_no:
                continue
            self.records[target] = await self._write(record)
            since = old.last_event if old is not None else 0
            await self.queue.live.record(
                [drain_event(target, text, ts) for _, ts, text in events_since(record, since)]
            )
            self.heap.set(target, next_timer(record))
            fut = self._changed.pop(target, None)
            if fut is not None and not fut.done():
                fut.set_result(None)
        self._track()
        self._arm()
        self._measure()

    async def _write(self, record: DrainRecord) -> DrainRecord:
        wire = msgspec.to_builtins(record)
        if record.serial_no == 0:
            stored = await self.link.add_drain(wire)
            return msgspec.convert(stored, DrainRecord)
        result = await self.link.update_drain(wire)
        return msgspec.structs.replace(record, serial_no=result.serial_no, mtime=result.mtime)

    def _track(self) -> None:
        self._tracked = {job.id: job.status for r in self.records.values() for job in r.active}

    def _measure(self) -> None:
        drains = self.metrics.gauge("lockwarden_drains")
        remaining = self.metrics.gauge("lockwarden_drain_remaining")
        counts = dict.fromkeys(get_args(Status), 0)
        for target, record in self.records.items():
            counts[record.status] += 1
            if record.status == "draining":
                remaining.set(drain_status(record, self.view, {}).remaining, target)
            else:
                remaining.remove(target)
        for status, count in counts.items():
            drains.set(count, status)

    # -- operator calls ------------------------------------------------------------------

    async def _operate(self, target: str, change: Change) -> DrainStatus:
        """Change the records with `change` (given the records, a fresh view and now),
        then run a pass with its effects first; the drain's status once written."""
        await self.ready.wait()
        async with self._lock:
            view = await self._read_view()
            records = dict(self.records)
            effects = change(records, view, time.time())
            await self._pass(effects, records)
            if self._wanted:
                self.request()
            return self._status(self.records[target])

    def _status(self, record: DrainRecord) -> DrainStatus:
        """A drain's status now, blocked moves with their budgets' reasons as they are."""
        reason = self.budgets.reason(self.records.values())
        return drain_status(record, self.view, self._facts(), reason)

    async def drain_node(
        self,
        name: str,
        deadline: float | None,
        max_parallel: int,
        priority: int,
        message: str,
        start_at: float | None = None,
    ) -> DrainStatus:
        target = node_target(name)

        def change(records: dict[str, DrainRecord], view: ClusterView, now: float) -> list[Effect]:
            records[target], effects = node.drain_node(
                records.get(target), name, view, now, deadline=deadline,
                max_parallel=max_parallel, priority=priority, message=message, start_at=start_at,
            )  # fmt: skip
            return effects

        return await self._operate(target, change)

    async def plan_node_drain(self, name: str, max_parallel: int) -> DrainPlan:
        """What drain_node would do now (luxid.drains.plan), on a fresh view and the drains
        as they are; changes nothing, so it takes no lock."""
        await self.ready.wait()
        view = view_from_config(await self.link.get_config())
        records = list(self.records.values())
        return plan_node_drain(
            view, records, name, max_parallel, place, budgets=self.budgets.plan_budgets()
        )

    async def cancel_node_drain(self, name: str, keep_drained: bool) -> DrainStatus:
        target = node_target(name)
        await self.ready.wait()
        if target not in self.records:
            raise errors.NotFound(f"node {name!r} never drained (`lw node drain-status`)")

        def change(records: dict[str, DrainRecord], view: ClusterView, now: float) -> list[Effect]:
            records[target] = node.cancel_node_drain(
                records[target], now, keep_drained=keep_drained
            )
            return []

        return await self._operate(target, change)

    async def drain_queue(self, mode: str, deadline: float | None, message: str) -> DrainStatus:
        def change(records: dict[str, DrainRecord], view: ClusterView, now: float) -> list[Effect]:
            records[QUEUE_TARGET] = queue_drain.drain_queue(
                records.get(QUEUE_TARGET), now, mode=mode, deadline=deadline, message=message
            )
            return []

        return await self._operate(QUEUE_TARGET, change)

    async def undrain_queue(self) -> None:
        await self.ready.wait()
        if QUEUE_TARGET not in self.records:
            return

        def change(records: dict[str, DrainRecord], view: ClusterView, now: float) -> list[Effect]:
            records[QUEUE_TARGET], effects = queue_drain.undrain_queue(records[QUEUE_TARGET], now)
            return effects

        await self._operate(QUEUE_TARGET, change)

    # -- queries -------------------------------------------------------------------------

    async def query(self) -> list[DrainStatus]:
        """Every node drain, then the queue drain if any."""
        await self.ready.wait()
        facts = self._facts()
        reason = self.budgets.reason(self.records.values())
        order = sorted(self.records, key=lambda t: (t == QUEUE_TARGET, t))
        return [drain_status(self.records[t], self.view, facts, reason) for t in order]

    def queue_drain_rule(self) -> tuple[str, Mode] | None:
        """The uuid and mode of the queue drain's filter rule, if any (for why_job)."""
        record = self.records.get(QUEUE_TARGET)
        if record is None or record.mode is None:
            return None
        return queue_drain.rule_uuid(record.started_at), record.mode

    def queue_status(self) -> DrainStatus | None:
        """The queue drain's status, if there is one (for query_queue_info)."""
        record = self.records.get(QUEUE_TARGET)
        return None if record is None else drain_status(record, self.view, self._facts())

    async def wait_for_change(self, target: str, since: int, timeout: float) -> DrainChange | str:
        """The drain's status and events after `since`, as soon as there are any."""
        check_target(target)
        await self.ready.wait()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + min(max(0.0, timeout), MAX_WAIT)
        while True:
            record = self.records.get(target)
            if record is None:
                raise errors.NotFound(f"{target} has no drain (see `lw node drain-status`)")
            events = events_since(record, since)
            if events:
                status = self._status(record)
                return DrainChange(status=status, events=[list(e) for e in events])
            left = deadline - loop.time()
            if left <= 0:
                return "nochange"
            fut = self._changed.get(target)
            if fut is None or fut.done():
                fut = loop.create_future()
                self._changed[target] = fut
            try:
                await asyncio.wait_for(asyncio.shield(fut), left)
            except TimeoutError:
                return "nochange"
