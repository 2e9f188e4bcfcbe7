"""luxid on etcd (docs/contracts.md#replicated-control-plane): serve while this node is
master, stand by otherwise.

The imperative shell around luxid.role (who is master), luxid.storage.etcd (the jobs) and
luxid.takeover (what happens to a failed master's jobs):

- the node becomes master (the leader key holds its name): open the job store fenced by
  the key's create revision and load it; if another node's luxid served last, take its
  jobs over (luxid.takeover) — committed together with this node's claim, fenced, before
  anything is answered; then open the queue and switch the RPC table to it;
- the node stops being master (the key changed, vanished, or cannot be read; or a write
  was fenced or its outcome lost): switch the table to the standby one at once (every call
  NotMaster), close the queue, and stop the term's job processes (SIGTERM, SIGKILL after
  10 s); a fenced write ends the term the same way. A write whose outcome is unknown ends
  the term but keeps its job processes: the next term re-loads from etcd and, on the same
  node, reattaches to them.

luxid's role is also its wconfd's role (luxid.wconfd_role, docs/operations.md#stalls):
the term ends the moment the node's wconfd names another master (or none, or another
term), even while the key still names this node; calls are answered only while wconfd
has confirmed the term lately, so a luxid resumed after a pause asks again (and re-reads
the key) before it answers, and a deposed one answers NotMaster naming the current master.
A term that ended by stopping its job processes leaves their jobs to the next term as a
failover would, even on this same node: queued again if no opcode had started, `error`
"master failover" otherwise.

Transitions run one at a time in one task that compares what is wanted with what is.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

from client._server.common import CommonMethods
from client._server.etcd.client import EtcdClient
from client._server.etcd.errors import Fenced
from client._server.etcd.url import EtcdStoreUrl
from client._server.metrics import Registry
from client._server.roles import Role, SharedRead
from client._server.server import RpcServer
from client.api.common import RoleInfo
from client.api.luxi import LuxiApi
from client.errors import StorageError
from luxid.events import job_events
from luxid.role import LeaderFollower, standby_methods
from luxid.storage.etcd import EtcdJobStore
from luxid.takeover import take_over
from luxid.term import STOP_GRACE, LuxidTerm, stop_job_processes
from luxid.wconfd_role import FRESH, Agreement, WconfdRoleWatch

log = logging.getLogger(__name__)

# A failed takeover (etcd unreachable, say) is tried again after this long while the
# node is still master.
RETRY_PAUSE = 0.5
# How long a call that meets the term in doubt waits for wconfd to confirm it.
SETTLE_WAIT = 1.5

# A term over the store, whose get_role answers what this node's role (`self`) says.
MakeTerm = Callable[[EtcdJobStore, Role], Awaitable[LuxidTerm]]


class HaLuxid:
    """Follows the leader key and runs a LuxidTerm exactly while this node is master."""

    def __init__(
        self,
        url: EtcdStoreUrl,
        node: str,
        ttl: float,
        server: RpcServer,
        make_term: MakeTerm,
        *,
        wconfd_socket: Path,
        stop_timeout: float,
        kill_after: float = STOP_GRACE,
    ) -> None:
        self.url = url
        self.node = node
        self.server = server
        self.make_term = make_term
        self.stop_timeout = stop_timeout
        self.kill_after = kill_after
        self.client = EtcdClient(url.endpoints, security=url.security)
        self.follower = LeaderFollower(
            self.client, prefix=url.prefix, ttl=ttl, on_change=self._changed
        )
        self.wconfd = WconfdRoleWatch(wconfd_socket, node, self._wconfd_changed)
        self._read_key = SharedRead(self.follower.refresh)
        self.standby = standby_methods(LuxiApi, CommonMethods(Registry("luxid"), role=self), self)
        server.methods = self.standby
        self.term: LuxidTerm | None = None
        self.token = 0  # the term served now (0: none)
        # A write of the term served now was fenced (True: its job processes must stop)
        # or its outcome lost (False: reload, keeping them); None while all is well.
        self._ended: bool | None = None
        self._wake = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self._task: asyncio.Task[None] | None = None
        self._store: EtcdJobStore | None = None  # the current or last term's
        # The last term stopped its job processes: the next one takes their jobs over.
        self._orphans = False

    def start(self) -> None:
        self.wconfd.start()
        self.follower.start()
        self._task = self._loop.create_task(self._run(), name="luxid-ha")

    async def close(self) -> None:
        """Stop following and end the term (its job processes keep running: a clean stop
        of luxid is not a loss of the role)."""
        await self.follower.stop()
        await self.wconfd.stop()
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if self.term is not None:
            await self._end_term(stop_jobs=False)
        await self.client.close()

    @property
    def serving(self) -> bool:
        """client._server.roles.Role: a term is running, still this node's, its wconfd has
        confirmed it lately, and its methods answer (while the term's queue opens, get_role
        must not say master yet: calls would still meet the standby table)."""
        return (
            bool(self.token)
            and self.wanted == self.token
            and self.server.methods is not self.standby
            and self.wconfd.agreement(self.token) is Agreement.CONFIRMED
        )

    async def settle(self) -> None:
        """client._server.roles.Role: before a NotMaster, let wconfd confirm or depose the
        term in doubt (luxid may just have resumed from a pause), and read the leader key
        afresh so the NotMaster names the current master."""
        deadline = time.monotonic() + SETTLE_WAIT
        while self.token and self.wconfd.agreement(self.token) is Agreement.DOUBT:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            await self.wconfd.fresh_answer(min(left, 0.5))
        if self.serving or not self._key_in_doubt():
            return
        await self._read_key(max(0.1, deadline - time.monotonic()))

    def _key_in_doubt(self) -> bool:
        """Whether the key as last seen may not name the master: it names this node or
        none, it disagrees with wconfd, or luxid may have been paused (wconfd's last
        answer is old). Otherwise the watch keeps it current and etcd is not asked."""
        seen, answer = self.follower.master, self.wconfd.answer
        return (
            seen in (None, self.node)
            or answer is None
            or answer.master != seen
            or self.wconfd.clock() - self.wconfd.received >= FRESH
        )

    def info(self) -> RoleInfo:
        """client._server.roles.Role: what get_role answers on this node."""
        f = self.follower
        if self.serving:
            return RoleInfo(node=self.node, role="master", master=f.master, term=f.term)
        return RoleInfo(node=self.node, role="standby", master=f.master, term=f.term)

    @property
    def wanted(self) -> int:
        """The term this node should serve now (0: none)."""
        f = self.follower
        deposed = self.wconfd.agreement(f.term) is Agreement.DEPOSED
        return f.term if f.master == self.node and f.term and not deposed else 0

    def _wconfd_changed(self) -> None:
        if self.token and self.wanted != self.token:
            self.server.methods = self.standby  # stop answering at once
            log.warning("wconfd no longer serves term %d: this node stands by", self.token)
        self._wake.set()

    def _changed(self, master: str | None, term: int) -> None:
        if self.token and self.wanted != self.token:
            self.server.methods = self.standby  # stop answering at once
        log.info("leader key: master %s (term %d); this node is %s", master, term, self.node)
        self.wconfd.poll_soon()
        self._wake.set()

    def _store_lost(self, error: StorageError) -> None:
        """From the store's writer thread: this term may write no more (fenced), or its
        memory may be behind etcd (a write's outcome unknown): end it, and load again if
        the node is still master."""
        fenced = isinstance(error, Fenced)
        self._loop.call_soon_threadsafe(self._lose, self.token, fenced, error.message)

    def _lose(self, token: int, fenced: bool, why: str) -> None:
        if token and token == self.token:
            log.warning("term %d ends: %s", token, why)
            self._ended = fenced or bool(self._ended)
            self.server.methods = self.standby
            self._wake.set()

    async def _run(self) -> None:
        while True:
            self._wake.clear()
            wanted = self.wanted
            if self.token and self._ended is not None:
                await self._end_term(stop_jobs=self._ended)
            elif self.token and wanted != self.token:
                await self._end_term(stop_jobs=True)
            self._ended = None
            if wanted and not self.token:
                try:
                    await self._begin_term(wanted)
                except StorageError as exc:
                    log.error("cannot take over as master (term %d): %s", wanted, exc.message)
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(self._wake.wait(), RETRY_PAUSE)
                    continue
            if self.wanted == self.token:
                await self._wake.wait()

    async def _begin_term(self, token: int) -> None:
        started = time.monotonic()
        known = self._store.last_job_id if self._store is not None else 0
        store = await asyncio.to_thread(
            EtcdJobStore.open,
            self.url,
            self.node,
            token,
            on_lost=self._store_lost,
            known_last_id=known,
        )
        self._store = store
        previous = store.previous_master  # claiming the jobs names this node
        try:
            changed = []
            if previous != self.node or self._orphans:
                before = {job.id: job for job in store.load_live()}
                changed = take_over(list(before.values()), store.gates(), time.time())
                changes = [(before.get(job.id), job) for job in changed]
                await asyncio.to_thread(store.claim, changed, job_events(changes, time.time()))
            else:
                await asyncio.to_thread(store.claim, changed)
            self._orphans = False
            self.token = token
            self.term = await self.make_term(store, self)
        except BaseException:
            self.token = 0
            await asyncio.to_thread(store.close)
            raise
        if self.wanted == token:
            self.server.methods = self.term.methods()
        log.info(
            "node %s serves as master (term %d) after %.2f s; took over %d job(s) of %s",
            self.node, token, time.monotonic() - started, len(changed), previous,
        )  # fmt: skip

    async def _end_term(self, *, stop_jobs: bool) -> None:
        term, token = self.term, self.token
        self.server.methods = self.standby
        self.term, self.token = None, 0
        if term is None:
            return
        processes = term.job_processes()
        await term.close(self.stop_timeout)
        log.info("node %s no longer serves term %d", self.node, token)
        if stop_jobs and processes:
            self._orphans = True
            log.warning("stopping %d job process(es) of the lost term", len(processes))
            await stop_job_processes(processes, self.kill_after)
