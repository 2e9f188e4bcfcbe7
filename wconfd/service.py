"""wconfd assembled: persistence, the lock, config and reservation services, the clients.

`WConfd` builds one `Persistence` (store, durable state, group commit, snapshots) and
hands it to plain service objects; its dispatch table (`methods`, every API method found
on exactly one of them) is built from them and rebuilt in place when they are replaced.
`guard` identifies the caller once per call and hands the identified `Client` to the
method. This module also holds the client methods (identify, list_clients,
cleanup_dead_clients), the role methods (list_roles, step_down), and the start-up step
that releases what clients that died while wconfd was down held.

On local files the state is loaded at construction. On etcd (wconfd.ha) the daemon starts
as a standby and `take_over` installs each term's state; `stand_by` drops it again.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from client._server.audit import Auditing, AuditQueries, AuditSettings, failover_entry
from client._server.audit import current as current_audit
from client._server.audit_sql import AuditDb
from client._server.common import CommonMethods
from client._server.dispatch import Handler, build_methods
from client._server.event_log import EventLog
from client._server.metrics import Registry, instrument
from client._server.roles import Role, SingleNode
from client._server.runner import StartupError
from client._server.server import Connection
from client.api.common import RoleInfo
from client.api.declare import MethodSpec
from client.api.wconfd import ClientInfo, Identity, PendingInfo, WConfdApi
from client.audit import AuditEntry
from client.errors import InvalidParams, RpcError
from client.events import EventRing, Retention, new_event
from client.identity import is_alive
from wconfd.audit_log import (
    NO_ENTRIES,
    AuditReader,
    LocalReader,
    WconfdAudit,
    open_audit_db,
    prune_etcd,
)
from wconfd.backup import Backups
from wconfd.clients import Client, ClientRegistry, parse_client_id
from wconfd.config_service import ConfigService
from wconfd.durable_state import (
    AuditNote,
    DurableState,
    EventNote,
    LockChange,
    Record,
    Snapshot,
)
from wconfd.lock_service import LockService
from wconfd.locking import RELEASE, LockManager, RestoreError
from wconfd.persistence import Persistence, load_durable_state, open_local_store
from wconfd.reservation_service import ReservationService
from wconfd.storage.errors import StorageCorruptError
from wconfd.storage.seam import DurableStore

log = logging.getLogger(__name__)

# Whether a client id belongs to another node's clients (released at a takeover).
Foreign = Callable[[str], bool]


class Failover(Protocol):
    """What `list_roles` and `step_down` need of the replicated control plane (wconfd.ha)."""

    async def roles(self) -> list[RoleInfo]:
        """Every node up and its role, the master first."""
        ...

    async def resign(self, wait: float) -> None:
        """Give up mastership; wait up to `wait` s for another master."""
        ...


class WConfd:
    """The daemon's state and services; see the module docstring."""

    def __init__(
        self,
        state_dir: Path | None,
        sweep_interval: float = 5.0,
        *,
        role: Role | None = None,
        standby_store: DurableStore[Snapshot, Record] | None = None,
        failover: Failover | None = None,
        event_retention: int | None = None,
        backup_dir: Path | None = None,
        audit: AuditSettings | None = None,
    ) -> None:
        """On local files (`state_dir`), load and serve at once. On etcd (`state_dir`
        None), start as a standby over `standby_store` (which refuses writes) until
        `take_over` installs the state of a term.  `event_retention`: how many events
        are kept (None: the default rule, docs/contracts.md#events).  `backup` writes below
        `backup_dir` (default `state_dir`; on etcd the node's local state directory).
        `audit`: the audit log's settings (docs/contracts.md#audit-log)."""
        self.audit_settings = audit or AuditSettings()
        self.metrics = Registry("wconfd")
        self.retention = Retention.from_option(event_retention)
        self.events = EventLog("wconfd", EventRing(self.retention))
        self._deaths = self.metrics.counter("lockwarden_dead_clients_released_total")
        self.role = role
        self.failover = failover
        self.methods: dict[str, Handler] = {}  # the dispatch table, rebuilt in place per term
        self.clients = ClientRegistry(self._holds_anything, self._client_died, sweep_interval)
        self.backups = Backups(
            backup_dir or state_dir or Path("."),
            lambda: self.persistence.state,
            lambda: self.persistence.audit,
        )
        if state_dir is not None:
            local = open_local_store(state_dir)
            store: DurableStore[Snapshot, Record] = local
            db = open_audit_db(state_dir)
            # The journal's audit notes the file lacks go to it in one transaction, not one
            # per note (a long journal holds one per audited write).  The file took every
            # note in seq order as it became durable, and loses only a suffix in a crash:
            # it holds (or pruned) every entry up to its last seq.
            known, replayed = db.last_seq(), list[AuditEntry]()

            def lacking(note: AuditNote) -> None:  # a note's entries are in seq order
                if note.entries and note.entries[-1].seq > known:
                    replayed.extend(e for e in note.entries if e.seq > known)

            loaded = _load(store, state_dir, self.retention, lacking)
            db.insert(replayed)
            persistence = Persistence(store, loaded)
            persistence.audit = self._audit_book(LocalReader(db), db.last_seq(), db)
            for record in self._restore_plan(persistence.state, lambda owner: False):
                persistence.commit_sync(record)
            persistence.commit_sync(self._master_note())
            # The flush metric counts the writes of the serving daemon, from here on.
            local.stats.on_write = self.metrics.histogram(
                "lockwarden_journal_flush_seconds"
            ).observe
        else:
            assert standby_store is not None, "a standby needs its store"
            persistence = Persistence(
                standby_store, DurableState.fresh(time.time(), self.retention)
            )
            persistence.audit = self._audit_book(NO_ENTRIES, 0)
        self._install(persistence)
        self.mark_master(state_dir is not None)

    def mark_master(self, serving: bool) -> None:
        """lockwarden_master{node}: 1 while this node serves as master, else 0."""
        node = (self.role or SingleNode()).info().node
        self.metrics.gauge("lockwarden_master").set(1 if serving else 0, node)

    def implementations(self) -> tuple[object, ...]:
        """The objects implementing WConfdApi, for client._server.dispatch.build_methods."""
        common = CommonMethods(self.metrics, self.role, self.events)
        audit = AuditQueries(lambda: self.persistence.audit)
        return (common, self, self.locks, self.config, self.reservations, self.backups, audit)

    def _audit_book(
        self, reader: AuditReader, last_seq: int, db: AuditDb | None = None
    ) -> WconfdAudit:
        """A term's audit log: its notes committed through the term's persistence."""

        async def commit(note: AuditNote) -> None:
            await self.persistence.commit([note])

        return WconfdAudit(commit, reader, last_seq, db, self.audit_settings.days)

    def _install(self, persistence: Persistence) -> None:
        """Serve `persistence`'s state: the services over it and the dispatch table."""
        try:
            manager = LockManager.restore(persistence.state.held_lists(), time.time())
        except RestoreError as exc:
            raise StartupError(f"stored lock state is inconsistent: {exc}") from None
        self.persistence = persistence
        self.events.ring = persistence.state.events
        persistence.on_events = self.events.woken
        self.events.woken()  # a new term's ring: waiters read it afresh
        events = self.events
        self.locks = LockService(persistence, manager, self.metrics, lambda: events.lock_wanted)
        self.config = ConfigService(persistence, lambda: self.locks.locks)
        self.reservations = ReservationService(persistence)
        auditing = None
        if self.audit_settings.enabled and persistence.audit is not None:
            auditing = Auditing("wconfd", persistence.audit, _own_job, time.time)
        table = build_methods(
            WConfdApi, *self.implementations(), guard=self.guard, role=self.role, auditing=auditing
        )
        self.methods.clear()
        self.methods.update(instrument(table, self.metrics))

    async def take_over(
        self,
        store: DurableStore[Snapshot, Record],
        foreign: Foreign,
        revision: tuple[int, Callable[[], int]] | None = None,
    ) -> None:
        """Become master over a loaded store (docs/contracts.md#replicated-control-plane):
        keep the holdings of live processes of this node, release those of other nodes'
        clients (`foreign`) and of the dead, then serve the state.  `revision`: on etcd,
        the load's revision and where to read the revision of the record being applied
        (events are numbered from it)."""
        # In a thread: rebuilding (and validating) a large config takes seconds of CPU,
        # and the event loop must keep the term's lease alive meanwhile (a loop blocked
        # for a TTL loses the term: the node would be elected and deposed forever).
        # The store is loaded already: this touches no I/O and nothing the loop uses.
        state = await asyncio.to_thread(load_durable_state, store, self.retention)
        # Imported here: a daemon on local files never loads the etcd client (start-up time).
        from wconfd.storage.etcd_store import EtcdStore

        if isinstance(store, EtcdStore) and not store.checked:
            await asyncio.to_thread(store.vouch_for, state.config.get_config())
        if revision is not None:
            state.start_term(revision[0])
            state.revision = revision[1]

        persistence = Persistence(store, state)
        records = [*self._restore_plan(persistence.state, foreign), self._master_note()]
        if isinstance(store, EtcdStore):
            persistence.audit = book = self._audit_book(store.audit, await store.audit.last_seq())
            node = (self.role or SingleNode()).info().node
            records.append(book.note([failover_entry("wconfd", node)]))
        await persistence.commit(records)
        self._install(persistence)
        if isinstance(store, EtcdStore):
            self.locks.spawn(prune_etcd(store.audit, self.audit_settings.days))

    def _master_note(self) -> EventNote:
        """The event of this node becoming the master (topic `role`)."""
        info = (self.role or SingleNode()).info()
        data = {"node": info.node, "term": info.term}
        event = new_event("wconfd", "role", "master", f"node/{info.node}", data, time.time())
        return EventNote([event])

    def stand_by(self, error: RpcError) -> None:
        """This node stopped serving: drop the term's store, fail its waiting calls and
        close its event followers' connections (they follow the new master)."""
        self.locks.abandon(error)
        self.events.close()
        self.persistence.close()

    def _restore_plan(self, state: DurableState, foreign: Foreign) -> list[Record]:
        """Adopt the owners of stored holdings that still live on this node; the records
        releasing what the others (dead, or `foreign`: on another node) held."""
        owners = set(state.locks) | set(state.reservations.owners())
        releases: list[Record] = []
        for owner in sorted(owners):
            live = False
            if not foreign(owner):
                try:
                    job_id, name, key = parse_client_id(owner)
                except ValueError:
                    pass
                else:
                    live = is_alive(key)
            if live:
                if owner not in self.clients.clients:
                    self.clients.adopt(owner, job_id, name, key)
                continue
            why = "was on another node" if foreign(owner) else "died while wconfd was down"
            if not foreign(owner):
                self._deaths.inc()
            log.info("client %r %s; releasing what it held", owner, why)
            held = state.locks.get(owner)
            if held:
                releases.append(LockChange(owner, [(lock, RELEASE) for lock in sorted(held)]))
            released = state.reservations.remove_owner(owner)
            if released is not None:
                releases.append(released)
        return releases

    def start(self) -> None:
        """Begin background work: watch the restored clients and sweep for deaths."""
        self.clients.watcher.start()

    def close(self) -> None:
        """Stop background work and close the store."""
        self.clients.watcher.stop()
        self.persistence.close()

    def guard(self, conn: Connection, spec: MethodSpec) -> Any:
        """The caller a method receives: the identified Client (NotIdentified if the
        connection has none), or the connection for identify/ping/version."""
        if spec.options.identified:
            return self.clients.require(conn)
        return conn

    def disconnected(self, conn: Connection) -> None:
        """A connection closed: forget its client if it was the last and holds nothing."""
        self.clients.disconnected(conn)

    def _holds_anything(self, client_id: str) -> bool:
        return self.locks.holds_locks(client_id) or self.reservations.holds_any(client_id)

    def _client_died(self, client_id: str) -> None:
        if self._holds_anything(client_id):  # a process that ended cleanly is no news
            self._deaths.inc()
        self.locks.release_owner(client_id)
        if self.reservations.holds_any(client_id):
            self.locks.spawn(self.reservations.drop_reservations(client_id))

    # -- roles (docs/contracts.md#replicated-control-plane) ----------------------------

    async def list_roles(self, client: Client) -> list[RoleInfo]:
        if self.failover is None:
            return [(self.role or SingleNode()).info()]
        return await self.failover.roles()

    async def step_down(self, client: Client, wait: float) -> RoleInfo:
        call = current_audit()
        if call is not None:
            call.target = f"node/{(self.role or SingleNode()).info().node}"
        if self.failover is None or self.role is None:
            raise InvalidParams(
                "this wconfd keeps its state in local files: no other node can take over; "
                "run the nodes with --store etcd://... for failover (see docs/operations.md)"
            )
        book = self.persistence.audit
        if call is not None and book is not None:
            # Recorded while this node can still write: once it has stepped down, it can
            # write nothing (the entry tells of the step down asked for and begun).
            call.taken = True
            await book.record(call.entries("ok", time.time()))
            call.recorded = True
        await self.failover.resign(wait)
        return self.role.info()

    # -- the client methods ------------------------------------------------------------

    async def identify(
        self, conn: Connection, job_id: int | None, pid: int, start_time: float, name: str | None
    ) -> Identity:
        client = self.clients.identify(conn, job_id, pid, start_time, name)
        return Identity(client_id=client.client_id)

    async def cleanup_dead_clients(self, client: Client) -> list[str]:
        return sorted(self.clients.sweep())

    async def list_clients(self, client: Client) -> list[ClientInfo]:
        infos = []
        reservations = self.persistence.state.reservations
        core = self.locks.locks
        for client_id, each in sorted(self.clients.clients.items()):
            pending = core.pending_request(client_id)
            infos.append(
                ClientInfo(
                    client_id=client_id,
                    job_id=each.job_id,
                    name=each.name,
                    pid=each.key.pid,
                    start_time=each.key.start_time,
                    locks=self.locks.list_locks_of(client_id),
                    reservations=[
                        (ns, v) for _, ns, v in reservations.list_reservations(client_id)
                    ],
                    connections=len(each.connections),
                    pending=None
                    if pending is None
                    else PendingInfo(
                        client_id=client_id,
                        priority=pending["priority"],
                        request=[(lock, mode) for lock, mode in pending["request"]],
                        since=pending["since"],
                    ),
                )
            )
        return infos


def _own_job(conn: Connection, client: Any) -> int | None:
    """The job id an audited caller identified with (None: not a job)."""
    return getattr(client, "job_id", None)


def _load(
    store: DurableStore[Snapshot, Record],
    state_dir: Path,
    retention: Retention,
    on_audit: Callable[[AuditNote], object],
) -> DurableState:
    """The durable state (the journal's audit notes to `on_audit`), or StartupError
    saying what to do."""
    try:
        return load_durable_state(store, retention, on_audit)
    except StorageCorruptError as exc:
        raise StartupError(f"{exc}; restore the state directory from a backup") from None
    except Exception as exc:
        raise StartupError(f"cannot rebuild the state from {state_dir}: {exc}") from None
