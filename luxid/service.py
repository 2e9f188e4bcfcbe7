"""luxid's RPC methods (client.api.luxi.LuxiApi): argument checks, then the queue.

Each method checks what the declaration's types cannot (opcodes against the opcode
registry, field names), delegates to `luxid.queue.Queue`, for filter writes to the
wconfd link, for drains to `luxid.drain_service.DrainService`, and shapes the answer.  Filters are read from, and judged by, the queue's
one filter set (luxid.active_filters), which a filter write updates before it answers.  Every error a client can cause is a typed client.errors
exception; anything else is a bug, logged by the dispatcher as an InternalError.
"""

from __future__ import annotations

from typing import Any

from client import errors
from client._server.common import CommonMethods
from client._server.server import Connection
from client.api.luxi import (
    Directive,
    DrainChange,
    DrainStatus,
    JobChange,
    JobEvent,
    Opcode,
    QueueInfo,
    QueueOverview,
)
from client.filterrules import FilterRule
from jobproc.opcodes.registry import get_opcode_class, validate_job
from luxid.drain_service import DrainService
from luxid.drains.record import DRAIN_KILL_GRACE
from luxid.jobs import register_summary_field, validate_ops
from luxid.jobs.fields import SUMMARY_FIELDS
from luxid.queue import Queue
from luxid.wconfd_link import WconfdLink


def check_job(ops: list[Opcode]) -> None:
    """A submitted job's opcodes, checked (InvalidParams / InvalidOpcode naming op and
    param); a third-party opcode's summary field is learned on the way."""
    validate_ops(ops)
    for op_id, _params in validate_job(ops):
        if op_id not in SUMMARY_FIELDS:
            field = get_opcode_class(op_id).SUMMARY_FIELD
            if field is not None:
                register_summary_field(op_id, field)


class LuxidService(CommonMethods):
    """Implements client.api.luxi.LuxiApi over a Queue and a WconfdLink."""

    def __init__(
        self, queue: Queue, config: WconfdLink, drain_kill_after: float = DRAIN_KILL_GRACE
    ) -> None:
        self.queue = queue
        self.config = config
        self.metrics = queue.metrics
        self.drains = DrainService(
            queue, config, self.metrics,
            submit=self._submit_internal, put_rule=self._put_rule, drop_rule=self._drop_rule,
            kill_after=drain_kill_after,
        )  # fmt: skip
        queue.live.on_change = self.drains.jobs_changed
        config.on_change = self.drains.config_changed

    # -- jobs --------------------------------------------------------------------------

    async def submit_job(self, conn: Connection, ops: list[Opcode]) -> int:
        check_job(ops)
        (job,) = await self.queue.submit([ops])
        return job.id

    async def _submit_internal(self, ops: list[Opcode]) -> int:
        """A drain's job: checked as any, not refused by the drain flag."""
        check_job(ops)
        (job,) = await self.queue.submit([ops], internal=True)
        return job.id

    async def submit_many_jobs(
        self, conn: Connection, jobs: list[list[Opcode]]
    ) -> list[tuple[bool, Any]]:
        answers: list[tuple[bool, Any]] = []
        valid: list[list[Opcode]] = []
        for ops in jobs:
            try:
                check_job(ops)
            except (errors.InvalidOpcode, errors.InvalidParams) as exc:
                answers.append((False, exc.message))
            else:
                answers.append((True, None))
                valid.append(ops)
        stored = iter(await self.queue.submit(valid) if valid else [])
        return [(True, next(stored).id) if ok else (ok, msg) for ok, msg in answers]

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
        return await self.queue.live.serial.wait(since_serial, timeout)

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
        rule = await self._put_rule(uuid, priority, predicates, action, reason)
        return rule.uuid

    async def delete_filter(self, conn: Connection, uuid: str) -> None:
        await self._drop_rule(uuid)

    async def _put_rule(
        self, uuid: str | None, priority: int, predicates: list[Any], action: Any, reason: list[Any]
    ) -> FilterRule:
        """Write a rule (watermark: the last job id) and judge by it at once."""
        rule = await self.config.replace_filter(
            uuid, priority, predicates, action, reason, watermark=self.queue.live.last_id
        )
        self.queue.filters.put(rule)
        self.queue.request_pass()
        return rule

    async def _drop_rule(self, uuid: str) -> None:
        await self.config.delete_filter(uuid)
        self.queue.filters.remove(uuid)
        self.queue.request_pass()

    async def query_filters(
        self, conn: Connection, uuids: list[str] | None, fields: list[str] | None
    ) -> list[list[Any]]:
        await self.queue.settings_known.wait()
        return self.queue.filters.rows(uuids, fields)

    # -- job processes -----------------------------------------------------------------

    async def job_report(self, conn: Connection, job_id: int, event: JobEvent) -> Directive:
        return await self.queue.report(conn, job_id, event)

    # -- drains (SPEC §12): luxid.drain_service ------------------------------------------

    async def drain_node(
        self,
        conn: Connection,
        node: str,
        deadline: float | None,
        max_parallel: int,
        priority: int,
        message: str,
    ) -> DrainStatus:
        return await self.drains.drain_node(node, deadline, max_parallel, priority, message)

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
