"""One term of serving: a job store, the queue over it, the link to wconfd, the filter
writes, the drains and the RPC methods — what luxid runs while it is master.

`LuxidTerm.start` is the one place where luxid's parts are built and connected; read it
to see who calls whom.  Requests go by plain calls: the RPC methods (luxid.service) call
the queue, the filter writes and the drains; the drains call the queue and the filter
writes.  Two events go the other way, and both are connected there: the link's reads of
the configuration (to the queue, then the drains) and the queue's durable job changes
(to the drains).

On local storage luxid has one term from start to stop. On etcd
(docs/contracts.md#replicated-control-plane) it has one per mastership (luxid.ha): each
loads the state afresh, and a term that ends stops its job processes (`stop_job_processes`),
since a standby must run nothing.
"""

from __future__ import annotations

import asyncio
import logging
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from client._server.audit import Auditing, AuditQueries, AuditSettings, failover_entry
from client._server.dispatch import Handler, build_methods
from client._server.event_log import EventLog
from client._server.metrics import instrument
from client._server.roles import Role, SingleNode
from client.api.luxi import LuxiApi
from client.events import Retention
from client.identity import ProcessKey, is_alive
from luxid.audit_log import LuxidAudit
from luxid.backup import Backups
from luxid.budget_service import BudgetService
from luxid.drain_service import DrainService
from luxid.drains.record import DRAIN_KILL_GRACE
from luxid.events import master_event
from luxid.filter_writes import FilterWrites
from luxid.jobs import is_finalized
from luxid.processes import JobProcesses, Spawner, signal_process
from luxid.queue import Queue
from luxid.service import LuxidService
from luxid.storage import JobStore
from luxid.wconfd_link import ConfigRead, WconfdLink
from luxid.why import WhyJobs

log = logging.getLogger(__name__)

# The stop's grace: a master that lost its role SIGTERMs its job processes (a standby must
# run nothing) and SIGKILLs those still alive this long after.
STOP_GRACE = 10.0


@dataclass
class LuxidTerm:
    """The queue, wconfd link, drains and service over one opened store."""

    queue: Queue
    link: WconfdLink
    drains: DrainService
    budgets: BudgetService
    service: LuxidService
    backups: Backups
    audit: LuxidAudit
    auditing: AuditSettings

    @classmethod
    async def start(
        cls,
        store: JobStore,
        make_spawner: Callable[[JobProcesses], Spawner],
        sweep_interval: float,
        wconfd_socket: Path,
        *,
        role: Role | None = None,
        drain_kill_after: float = DRAIN_KILL_GRACE,
        event_retention: int | None = None,
        backup_dir: Path | None = None,
        audit: AuditSettings | None = None,
    ) -> LuxidTerm:
        """Open the queue over `store` (reattaching surviving job processes) and follow
        wconfd's configuration.  `role`: what get_role answers (default: the single node
        of a local store).  `drain_kill_after`: how long after a queue drain's deadline
        its canceled jobs still running are killed.  `event_retention`: how many events
        are kept (None: the default rule, docs/contracts.md#events).  `backup` writes
        below `backup_dir` (the node's state directory; default the working directory).
        `audit`: the audit log's settings (docs/contracts.md#audit-log)."""
        settings = audit or AuditSettings()
        # The parts, each given the parts it calls.  The event log first: every durable
        # change the others make is published to it by the job store's writer.
        events = EventLog("luxid", store.load_events(Retention.from_option(event_retention)))
        queue = Queue(store, make_spawner, sweep_interval, events)
        link = WconfdLink(wconfd_socket)
        filter_writes = FilterWrites(link, queue)
        drains = DrainService(
            queue, link, filter_writes, queue.metrics, kill_after=drain_kill_after
        )
        budgets = BudgetService(queue, link, events)
        why = WhyJobs(queue, drains, link)
        service = LuxidService(queue, filter_writes, drains, budgets, why, role, events)
        backups = Backups(backup_dir or Path("."), store)
        book = LuxidAudit(store, queue.live.writer, settings.days)
        term = cls(queue, link, drains, budgets, service, backups, book, settings)
        # The events, before anything can happen.
        link.on_config = term.config_read
        queue.scheduler.on_exceeded = term.budget_exceeded
        queue.tell_job_changes(drains.jobs_changed)
        # Then start: reattach the surviving job processes, follow the configuration,
        # resume the drains.
        await queue.open()
        info = (role or SingleNode()).info()
        await queue.live.record([master_event(info.node, info.term, time.time())])
        if info.term and settings.enabled:  # a master of the replicated control plane
            await book.record([failover_entry("luxid", info.node)])
        book.start()
        link.start()
        drains.start()
        return term

    def budget_exceeded(self, starts: list[tuple[str, int, str]]) -> None:
        """Jobs started past a budget: the event goes to the budget, and to the drain
        whose job it is."""
        self.budgets.exceeded(starts)
        self.drains.budget_exceeded(starts)

    def config_read(self, read: ConfigRead) -> None:
        """The link read the configuration after a change: the queue takes its settings
        and the budgets theirs (either schedules if they changed), then the drains see
        whether to re-plan."""
        self.budgets.config_read(read.budgets, read.instances, read.instances_version)
        self.queue.config_changed(read.max_running_jobs, read.filters)
        self.drains.config_changed()

    def methods(self) -> dict[str, Handler]:
        """The dispatch table of this term (counted in the service's metrics)."""
        service = self.service
        auditing = None
        if self.auditing.enabled:
            procs = self.queue.procs
            auditing = Auditing(
                "luxid", self.audit, lambda conn, _: procs.job_of_pid(conn.peer.pid), time.time
            )
        queries = AuditQueries(lambda: self.audit)
        table = build_methods(
            LuxiApi, service, self.backups, queries, role=service.role, auditing=auditing
        )
        return instrument(table, service.metrics)

    def job_processes(self) -> list[ProcessKey]:
        """The processes of the term's unfinished jobs."""
        return [
            ProcessKey(job.process_id, job.process_start or 0.0)
            for job in self.queue.jobs()
            if job.process_id is not None and not is_finalized(job)
        ]

    async def close(self, timeout: float) -> None:
        """Stop the drains, the link and the queue (job processes keep running); close
        the event followers' connections (they follow the next term)."""
        self.audit.stop()
        self.service.events.close()
        await self.drains.close()
        await self.link.close(timeout)
        await self.queue.close(timeout)


async def stop_job_processes(keys: list[ProcessKey], kill_after: float = STOP_GRACE) -> None:
    """SIGTERM each process, then SIGKILL those still alive after `kill_after` s."""
    alive = [key for key in keys if signal_process(key, signal.SIGTERM)]
    loop = asyncio.get_running_loop()
    deadline = loop.time() + kill_after
    while alive and loop.time() < deadline:
        await asyncio.sleep(0.1)
        alive = [key for key in alive if is_alive(key)]
    for key in alive:
        log.warning(
            "job process %d did not stop within %g s of SIGTERM: SIGKILL", key.pid, kill_after
        )
        signal_process(key, signal.SIGKILL)
