"""luxid's RPC methods (client.api.luxi.LuxiApi): argument checks, then the part that
does the work.

Each method checks what the declaration's types cannot (opcodes against the opcode
registry with luxid.job_check, field names) and makes one plain call: jobs and queries to
`luxid.queue.Queue`, filter writes to `luxid.filter_writes.FilterWrites` (the drains
write their rule there too), drains to `luxid.drain_service.DrainService`, why_job to
`luxid.why.WhyJobs`; then it shapes the answer.  Filters are read from, and judged by, the queue's one filter set
(luxid.active_filters), which a filter write updates before it answers.  The parts are
built and connected by luxid.term.  Every error a client can cause is a typed
client.errors exception; anything else is a bug, logged by the dispatcher as an
InternalError.
"""

from __future__ import annotations

from typing import Any

from client import errors
from client._server.audit import current as current_audit
from client._server.common import CommonMethods
from client._server.event_log import EventLog
from client._server.roles import Role
from client._server.server import Connection
from client.api.luxi import (
    BudgetRow,
    Directive,
    DrainChange,
    DrainPlan,
    DrainStatus,
    JobChange,
    JobEvent,
    Opcode,
    QueueInfo,
    QueueOverview,
    WhyJob,
)
from luxid.budget_service import BudgetService
from luxid.drain_service import DrainService
from luxid.filter_writes import FilterWrites
from luxid.job_check import check_job
from luxid.queue import Queue
from luxid.why import WhyJobs


class LuxidService(CommonMethods):
    """Implements client.api.luxi.LuxiApi over the queue, the filter writes and the
    drains (built by luxid.term)."""

    def __init__(
        self,
        queue: Queue,
        filter_writes: FilterWrites,
        drains: DrainService,
        budgets: BudgetService,
        why: WhyJobs,
        role: Role | None = None,
        events: EventLog | None = None,
    ) -> None:
        super().__init__(queue.metrics, role, events)
        self.queue = queue
        self.filter_writes = filter_writes
        self.drains = drains
        self.budgets = budgets
        self.why = why

    # -- jobs --------------------------------------------------------------------------

    async def submit_job(self, conn: Connection, ops: list[Opcode]) -> int:
        check_job(ops)
        (job,) = await self.queue.submit([ops], audit=current_audit())
        return job.id

    async def submit_many_jobs(
        self, conn: Connection, jobs: list[list[Opcode]]
    ) -> list[tuple[bool, Any]]:
        answers: list[tuple[bool, Any]] = []
        kinds: list[str] = []  # each member's error type ("" when valid)
        valid: list[list[Opcode]] = []
        for ops in jobs:
            try:
                check_job(ops)
            except (errors.InvalidOpcode, errors.InvalidParams) as exc:
                answers.append((False, exc.message))
                kinds.append(exc.type_name)
            else:
                answers.append((True, None))
                kinds.append("")
                valid.append(ops)
        call = current_audit()
        if call is not None:
            call.take()  # one entry per member, recorded once the ids are known
        stored = iter(await self.queue.submit(valid) if valid else [])
        outcome = [(True, next(stored).id) if ok else (ok, msg) for ok, msg in answers]
        if call is not None:
            call.members = [
                (f"job/{value}", "ok") if ok else ("queue", refused)
                for (ok, value), refused in zip(outcome, kinds, strict=True)
            ]
        return outcome

    async def query_jobs(
        self, conn: Connection, ids: list[int] | None, fields: list[str]
    ) -> list[list[Any] | None]:
        return self.queue.query(ids, fields)

    async def wait_for_job_change(
        self,
        conn: Connection,
        job_id: int,
        fields: list[str],
        prev_values: list[Any] | None,
        prev_log_serial: int | None,
        timeout: float,
    ) -> JobChange | str:
        return await self.queue.wait_for_change(
            job_id, fields, prev_values, prev_log_serial, timeout
        )

    async def cancel_job(self, conn: Connection, job_id: int, kill: bool) -> tuple[bool, str]:
        return await self.queue.cancel(job_id, kill)

    async def change_job_priority(
        self, conn: Connection, job_id: int, priority: int
    ) -> tuple[bool, str]:
        return await self.queue.change_priority(job_id, priority)

    async def archive_job(self, conn: Connection, job_id: int) -> bool:
        return await self.queue.archive(job_id)

    async def auto_archive_jobs(
        self, conn: Connection, age: float, timeout: float | None
    ) -> tuple[int, int]:
        if timeout is not None and timeout < 0:
            raise errors.InvalidParams("param `timeout`: must be >= 0 or null (no limit)")
        return await self.queue.auto_archive(age, timeout)

    async def why_job(self, conn: Connection, job_id: int) -> WhyJob:
        return await self.why.why(job_id)

    async def set_drain_flag(self, conn: Connection, flag: bool) -> bool:
        await self.queue.set_drained(flag)
        return True

    async def query_queue_info(self, conn: Connection) -> QueueInfo:
        await self.queue.settings_known.wait()
        return QueueInfo(**self.queue.queue_info(), queue_drain=self.drains.queue_status())

    async def query_queue_overview(
        self, conn: Connection, queued: int, recent: int
    ) -> QueueOverview:
        return self.queue.overview(queued, recent)

    async def wait_queue_change(self, conn: Connection, since_serial: int, timeout: float) -> int:
        return await self.queue.wait_change(since_serial, timeout)

    # -- filters -----------------------------------------------------------------------

    async def replace_filter(
        self,
        conn: Connection,
        uuid: str | None,
        priority: int,
        predicates: list[Any],
        action: Any,
        reason: list[Any],
    ) -> str:
        call = current_audit()
        if call is not None:  # recorded once the rule's uuid is known (a new one's too)
            call.take()
            call.target = f"filter/{uuid}" if uuid is not None else "filter"
        rule = await self.filter_writes.put(uuid, priority, predicates, action, reason)
        if call is not None:
            call.target = f"filter/{rule.uuid}"
        return rule.uuid

    async def delete_filter(self, conn: Connection, uuid: str) -> None:
        await self.filter_writes.drop(uuid)

    async def query_filters(
        self, conn: Connection, uuids: list[str] | None, fields: list[str] | None
    ) -> list[list[Any]]:
        await self.queue.settings_known.wait()
        return self.queue.filter_rows(uuids, fields)

    # -- disruption budgets: luxid.budget_service -------------------------------------

    async def set_budget(
        self, conn: Connection, name: str, tags: list[str], max_disrupted: int, actor: str | None
    ) -> BudgetRow:
        await self.queue.settings_known.wait()
        return await self.budgets.set_budget(name, tags, max_disrupted, actor)

    async def delete_budget(self, conn: Connection, name: str, actor: str | None) -> None:
        await self.queue.settings_known.wait()
        await self.budgets.delete_budget(name, actor)

    async def query_budgets(self, conn: Connection) -> list[BudgetRow]:
        await self.queue.settings_known.wait()
        return self.budgets.rows()

    # -- job processes -----------------------------------------------------------------

    async def job_report(self, conn: Connection, job_id: int, event: JobEvent) -> Directive:
        return await self.queue.report(conn, job_id, event)

    # -- drains (docs/contracts.md#drains): luxid.drain_service ------------------------

    async def drain_node(
        self,
        conn: Connection,
        node: str,
        deadline: float | None,
        max_parallel: int,
        priority: int,
        message: str,
        start_at: float | None,
    ) -> DrainStatus:
        return await self.drains.drain_node(
            node, deadline, max_parallel, priority, message, start_at
        )

    async def plan_node_drain(self, conn: Connection, node: str, max_parallel: int) -> DrainPlan:
        return await self.drains.plan_node_drain(node, max_parallel)

    async def cancel_node_drain(
        self, conn: Connection, node: str, keep_drained: bool
    ) -> DrainStatus:
        return await self.drains.cancel_node_drain(node, keep_drained)

    async def drain_queue(
        self, conn: Connection, mode: str, deadline: float | None, message: str
    ) -> DrainStatus:
        return await self.drains.drain_queue(mode, deadline, message)

    async def undrain_queue(self, conn: Connection) -> None:
        await self.drains.undrain_queue()

    async def query_drains(self, conn: Connection) -> list[DrainStatus]:
        return await self.drains.query()

    async def wait_for_drain_change(
        self, conn: Connection, target: str, since_event: int, timeout: float
    ) -> DrainChange | str:
        return await self.drains.wait_for_change(target, since_event, timeout)
