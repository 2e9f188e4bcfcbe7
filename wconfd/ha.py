"""wconfd on etcd (docs/contracts.md#replicated-control-plane): the election decides the
role, a takeover loads the state.

`HaShell` runs this node's candidacy and presence. While it is standby every call but
ping, version, identify and get_role is NotMaster (the dispatch asks `ElectedRole`). When
elected it builds the term's `EtcdStore`, loads the state at one revision, releases the
holdings of clients of other nodes and of dead ones, and only then serves. It stops
serving at once when the lease could not be renewed, etcd says it is gone, a write finds
the term over (`Fenced`) or a write's outcome is unknown: the next term (of this node or
another) loads what etcd has, so memory never holds what etcd does not.

Through stalls (docs/operations.md#stalls): the node serves only while its lease is alive
by its own clock (the election proves it again after a pause, or steps down and revokes
it); a call that meets the node in doubt (loading, proving its lease, just deposed) waits
a moment for the role to settle and a NotMaster names the master etcd's key names. The
node's luxid is watched (wconfd.luxid_watch): a master whose luxid hangs steps down, and a
standby campaigns only while its luxid answers.

A restarted wconfd that finds the leader key held by its own node name (its previous
process, killed; two live wconfds never share a node name) keeps that lease and term: the
node stays master, so its luxid and running jobs ride the restart out
(docs/contracts.md#reliability-and-security). Its first write moves its commit marker on,
which fences any write the dead process left in flight.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from pathlib import Path

from client._server.audit import AuditSettings
from client._server.etcd.client import EtcdClient
from client._server.etcd.election import Term
from client._server.etcd.errors import EtcdError, Fenced
from client._server.etcd.leader import LeaderElection
from client._server.etcd.presence import NodeInfo, Presence, list_nodes
from client._server.etcd.release import warn_of_known_faults
from client._server.etcd.url import EtcdStoreUrl
from client._server.roles import SharedRead, not_master
from client.api.common import RoleInfo
from client.errors import RpcError, StorageError
from wconfd.luxid_watch import LuxidWatch
from wconfd.service import WConfd
from wconfd.storage.etcd_store import EtcdStore

log = logging.getLogger(__name__)

WRITER = "wconfd"
# How long a call that meets the node in doubt waits for its role to settle.
SETTLE_WAIT = 1.5


class ElectedRole:
    """The node's role as the election and the takeover make it (client._server.roles.Role)."""

    def __init__(self, election: LeaderElection) -> None:
        self.election = election
        self.loaded = False  # master with its state loaded
        self._read_master = SharedRead(election.current_master)

    @property
    def serving(self) -> bool:
        """Master, state loaded, and the lease alive by this node's clock."""
        return self.loaded and self.election.holds_lease()

    def info(self) -> RoleInfo:
        e = self.election
        term = e.term.token if e.term is not None else e.master_term if e.master else 0
        if self.serving:
            return RoleInfo(node=e.node, role="master", master=e.master, term=term)
        return RoleInfo(node=e.node, role="standby", master=e.master, term=term)

    def _in_doubt(self) -> bool:
        """Holding the key without serving (loading, proving the lease after a pause)."""
        return self.election.term is not None and not self.serving

    async def settle(self) -> None:
        """Before a NotMaster: wait a moment while the node is in doubt, then, unless it
        serves or knows another master, read the leader key from etcd."""
        deadline = time.monotonic() + SETTLE_WAIT
        while self._in_doubt() and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        if self.serving or self.election.master not in (None, self.election.node):
            return
        await self._read_master(max(0.1, deadline - time.monotonic()))


class HaShell:
    """This node's wconfd on etcd; see the module docstring."""

    def __init__(
        self,
        url: EtcdStoreUrl,
        node: str,
        ttl: float,
        sweep_interval: float = 5.0,
        *,
        luxid_socket: Path | None = None,
        event_retention: int | None = None,
        state_dir: Path | None = None,
        audit: AuditSettings | None = None,
    ) -> None:
        self.url = url
        self.node = node
        self.client = EtcdClient(url.endpoints, security=url.security)
        self.luxid = None if luxid_socket is None else LuxidWatch(luxid_socket, self._luxid_hung)
        self.election = LeaderElection(
            self.client,
            prefix=url.prefix,
            node=node,
            ttl=ttl,
            on_elected=self._elected,
            on_deposed=self._deposed,
            may_campaign=None if self.luxid is None else self.luxid.answers,
        )
        self.presence = Presence(
            self.client, prefix=url.prefix, info=NodeInfo(node, time.time()), ttl=ttl
        )
        self.role = ElectedRole(self.election)
        self._takeover: asyncio.Task[None] | None = None
        self._term_store: EtcdStore | None = None  # the current or last term's
        self.service = WConfd(
            None,
            sweep_interval,
            role=self.role,
            standby_store=self._store(),
            failover=self,
            event_retention=event_retention,
            backup_dir=state_dir,
            audit=audit,
        )

    def _store(self) -> EtcdStore:
        writer = self.election.writer(WRITER) if self.election.term else None
        known = self._term_store.durable_serial if self._term_store is not None else 0
        return EtcdStore(
            self.client,
            writer,
            prefix=self.url.prefix,
            node=self.node,
            on_lost=self._lost,
            known_serial=known,
        )

    async def start(self, settle: float) -> None:
        """Campaign (and keep this node's presence); wait up to `settle` seconds until the
        first outcome is known (serving, or another master seen) before the socket opens.
        AccessRefused first when etcd refuses our certificate or user."""
        await self.client.check_access(self.url.prefix)
        await self._resume()
        if self.luxid is not None:
            self.luxid.start()
        self.presence.start()
        self.election.start()
        deadline = time.monotonic() + settle
        while time.monotonic() < deadline:
            if self.role.serving or self.election.master not in (None, self.node):
                return
            await asyncio.sleep(0.02)

    async def _resume(self) -> None:
        """Serve on in this node's term if a predecessor of this process held it (killed,
        restarted at once): the node's luxid and its jobs ride the restart out. Warn of the
        etcd release's known faults (client.etcd_binary.KNOWN_FAULTS)."""
        try:
            await self.election.resume()
            await warn_of_known_faults(self.client)
        except EtcdError as exc:
            log.warning("could not check the leader key at start: %s", exc)

    async def stop(self) -> None:
        """Give up mastership and presence (others take over at once), close etcd."""
        if self._takeover is not None:
            self._takeover.cancel()
        if self.luxid is not None:
            await self.luxid.stop()
        await self.election.stop()
        await self.presence.stop()
        await self.client.close()

    async def roles(self) -> list[RoleInfo]:
        """Every node with a presence key, and the leader key's holder: the master first."""
        # In a task of its own: the server may run a call's first step outside any task,
        # where aiohttp's timeouts cannot work.
        return await asyncio.get_running_loop().create_task(self._roles())

    async def _roles(self) -> list[RoleInfo]:
        nodes = {info.node for info in await list_nodes(self.client, self.url.prefix)}
        master = await self.election.current_master()
        term = self.election.master_term
        if master is not None:
            nodes.add(master)
        return [
            RoleInfo(node=n, role="master" if n == master else "standby", master=master, term=term)
            for n in sorted(nodes, key=lambda n: (n != master, n))
        ]

    async def resign(self, wait: float) -> None:
        """Step down for `lw cluster failover` (a standby takes over; this node does not
        campaign again for one TTL)."""
        await asyncio.get_running_loop().create_task(self.election.resign(wait))

    def _elected(self, term: Term) -> None:
        self._takeover = asyncio.get_running_loop().create_task(self._take_over(term))

    async def _take_over(self, term: Term) -> None:
        store = self._term_store = self._store()
        t0 = time.monotonic()
        try:
            # Move the commit marker on before loading: a write of a killed predecessor in
            # the same term (resumed) still in flight can then never commit after the load.
            await self.election.writer(WRITER).commit([])
            await store.load()
            if self.election.term is not term:
                store.close()
                return
            nodes = store.nodes
            await self.service.take_over(
                store,
                lambda owner: nodes.get(owner, self.node) != self.node,
                (store.loaded_revision, lambda: store.revision),
            )
            # The flush metric counts the writes of the serving term, from after its own
            # start-up writes (the releases of the dead and its master event) on.
            store.on_write = self.service.metrics.histogram(
                "lockwarden_journal_flush_seconds"
            ).observe
        except Exception as exc:
            if not isinstance(exc, EtcdError | StorageError):
                log.exception("taking over failed")
            store.close()
            self.election.step_down(f"taking over failed: {exc}")
            return
        if self.election.term is term:
            self.role.loaded = True
            self.service.mark_master(True)
            log.info(
                "node %s serves as master (term %d) after loading in %.3f s",
                self.node,
                term.token,
                time.monotonic() - t0,
            )
        else:
            store.close()

    def _luxid_hung(self, silent: float) -> None:
        """The node's luxid has not answered for `silent` seconds: a master gives the key
        up (a standby whose luxid answers takes it); a standby already does not campaign."""
        if self.election.term is None:
            log.warning("luxid of node %s has not answered for %.1f s", self.node, silent)
            return
        log.error(
            "luxid of node %s has not answered for %.1f s: stepping down as master so that "
            "a node whose luxid answers takes over",
            self.node, silent,
        )  # fmt: skip
        self.election.step_down(f"its luxid has not answered for {silent:.1f} s")

    def _deposed(self, reason: str) -> None:
        self.role.loaded = False
        self.service.mark_master(False)
        if self._takeover is not None and not self._takeover.done():
            self._takeover.cancel()
        error = not_master(self.role)
        if self._term_store is not None:
            self._term_store.stop(error)  # queued writes answer NotMaster, not "closed"
        with contextlib.suppress(Exception):
            self.service.stand_by(error)

    def _lost(self, error: StorageError) -> RpcError:
        """A write failed in a way only a new load can sort out: stop serving."""
        self.role.loaded = False
        self.election.step_down(f"a write to etcd failed: {error.message}")
        return not_master(self.role) if isinstance(error, Fenced) else error
