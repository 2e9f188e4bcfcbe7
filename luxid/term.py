"""One term of serving: a job store, the queue over it, the link to wconfd and the RPC
methods — what luxid runs while it is master.

On local storage luxid has one term from start to stop. On etcd (SPEC §13) it has one per
mastership (luxid.ha): each loads the state afresh, and a term that ends stops its job
processes (`stop_job_processes`), since a standby must run nothing.
"""

from __future__ import annotations

import asyncio
import logging
import signal
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from client._server.dispatch import Handler, build_methods
from client._server.metrics import instrument
from client.api.luxi import LuxiApi
from client.identity import ProcessKey, is_alive
from luxid.drains.record import DRAIN_KILL_GRACE
from luxid.jobs import is_finalized
from luxid.processes import JobProcesses, Spawner, signal_process
from luxid.queue import Queue
from luxid.service import LuxidService
from luxid.storage import JobStore
from luxid.wconfd_link import WconfdLink

log = logging.getLogger(__name__)

# The stop's grace: a master that lost its role SIGTERMs its job processes (a standby must
# run nothing) and SIGKILLs those still alive this long after.
STOP_GRACE = 10.0


@dataclass
class LuxidTerm:
    """The queue, wconfd link and service over one opened store."""

    queue: Queue
    config: WconfdLink
    service: LuxidService

    @classmethod
    async def start(
        cls,
        store: JobStore,
        make_spawner: Callable[[JobProcesses], Spawner],
        sweep_interval: float,
        wconfd_socket: Path,
        *,
        drain_kill_after: float = DRAIN_KILL_GRACE,
    ) -> LuxidTerm:
        """Open the queue over `store` (reattaching surviving job processes) and follow
        wconfd's configuration.  `drain_kill_after`: how long after a queue drain's
        deadline its canceled jobs still running are killed (§12.2)."""
        queue = Queue(store, make_spawner, sweep_interval)
        config = WconfdLink(wconfd_socket, queue.config_changed)
        term = cls(queue, config, LuxidService(queue, config, drain_kill_after))
        await queue.open()
        config.start()
        term.service.drains.start()
        return term

    def methods(self) -> dict[str, Handler]:
        """The dispatch table of this term (counted in the service's metrics)."""
        return instrument(build_methods(LuxiApi, self.service), self.service.metrics)

    def job_processes(self) -> list[ProcessKey]:
        """The processes of the term's unfinished jobs."""
        return [
            ProcessKey(job.process_id, job.process_start or 0.0)
            for job in self.queue.live.jobs.values()
            if job.process_id is not None and not is_finalized(job)
        ]

    async def close(self, timeout: float) -> None:
        """Stop the drains, the link and the queue (job processes keep running)."""
        await self.service.drains.close()
        await self.config.close(timeout)
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
