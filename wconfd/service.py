"""wconfd assembled: persistence, the lock, config and reservation services, the clients.

`WConfd` builds one `Persistence` (store, durable state, group commit, snapshots) and
hands it to plain service objects; `implementations()` is what the dispatch table is
built from, each API method found on exactly one of them.  `guard` identifies the caller
once per call and hands the identified `Client` to the method.  This module also holds
the client methods (identify, list_clients, cleanup_dead_clients) and the start-up step
that releases what clients that died while wconfd was down held.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from client.api.declare import MethodSpec
from client.api.wconfd import ClientInfo, Identity, PendingInfo
from client.daemon.common import CommonMethods
from client.daemon.procwatch import is_alive
from client.daemon.runner import StartupError
from client.daemon.server import Connection
from client.metrics import Registry
from wconfd.clients import Client, ClientRegistry, parse_client_id
from wconfd.config_service import ConfigService
from wconfd.durable import (
    RELEASE,
    DurableState,
    LockChange,
    Record,
    Snapshot,
    load_durable_state,
    open_local_store,
)
from wconfd.lock_service import LockService
from wconfd.locking import LockManager, RestoreError
from wconfd.persistence import Persistence
from wconfd.reservation_service import ReservationService
from wconfd.storage.errors import StorageCorruptError
from wconfd.storage.seam import DurableStore

log = logging.getLogger(__name__)


class WConfd:
    """The daemon's state and services; see the module docstring."""

    def __init__(self, state_dir: Path, sweep_interval: float = 5.0) -> None:
        self.metrics = Registry("wconfd")
        self._deaths = self.metrics.counter("lockwarden_dead_clients_released_total")
        store = open_local_store(state_dir)
        store.stats.on_write = self.metrics.histogram("lockwarden_journal_flush_seconds").observe
        self.persistence = Persistence(store, _load(store, state_dir))
        self.clients = ClientRegistry(self._holds_anything, self._client_died, sweep_interval)
        self.locks = LockService(self.persistence, self._restore_locks(), self.metrics)
        self.config = ConfigService(self.persistence, lambda: self.locks.locks)
        self.reservations = ReservationService(self.persistence)

    def implementations(self) -> tuple[object, ...]:
        """The objects implementing WConfdApi, for client.daemon.dispatch.build_methods."""
        return (CommonMethods(self.metrics), self, self.locks, self.config, self.reservations)

    def _restore_locks(self) -> LockManager:
        """Keep the locks and reservations of clients that still live; release the rest."""
        state = self.persistence.state
        owners = set(state.locks) | set(state.reservations.owners())
        for owner in sorted(owners):
            try:
                job_id, name, key = parse_client_id(owner)
            except ValueError:
                live = False
            else:
                live = is_alive(key)
            if live:
                self.clients.adopt(owner, job_id, name, key)
                continue
            log.info("client %s died while wconfd was down; releasing what it held", owner)
            self._deaths.inc()
            held = state.locks.get(owner)
            if held:
                self.persistence.commit_sync(
                    LockChange(owner, [(lock, RELEASE) for lock in sorted(held)])
                )
            released = state.reservations.remove_owner(owner)
            if released is not None:
                self.persistence.commit_sync(released)
        try:
            return LockManager.restore(state.held_lists())
        except RestoreError as exc:
            raise StartupError(f"stored lock state is inconsistent: {exc}") from None

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


def _load(store: DurableStore[Snapshot, Record], state_dir: Path) -> DurableState:
    """The durable state, or StartupError saying what to do."""
    try:
        return load_durable_state(store)
    except StorageCorruptError as exc:
        raise StartupError(f"{exc}; restore the state directory from a backup") from None
    except Exception as exc:
        raise StartupError(f"cannot rebuild the state from {state_dir}: {exc}") from None
