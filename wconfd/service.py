"""wconfd's service: the durable state, the lock core and the clients, behind the API.

`WConfdService` implements client.api.wconfd.WConfdApi by mixing the lock methods
(lock_service) and the configuration and reservation methods (config_service) over one
durable state (durable.py) kept in one journal.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from pathlib import Path

from client.api.declare import MethodSpec
from client.api.wconfd import ClientInfo, Identity, PendingInfo
from client.daemon.common import CommonMethods
from client.daemon.procwatch import is_alive
from client.daemon.runner import StartupError
from client.daemon.server import Connection
from client.metrics import Registry
from wconfd.clients import ClientRegistry, parse_client_id
from wconfd.config_service import ConfigMethods
from wconfd.durable import DurableState, HeldLocks, Record, Snapshot
from wconfd.lock_service import LockMethods
from wconfd.locking import LockManager, RestoreError
from wconfd.storage.errors import StorageCorruptError
from wconfd.storage.store import LocalStore, recover

log = logging.getLogger(__name__)


class WConfdService(CommonMethods, LockMethods, ConfigMethods):
    """Implements WConfdApi; `guard` refuses calls before identify."""

    def __init__(self, state_dir: Path, sweep_interval: float = 5.0) -> None:
        self.store: LocalStore[Snapshot, Record] = LocalStore(
            state_dir,
            "wconfd",
            snapshot_type=Snapshot,
            record_type=Record,
        )
        self.metrics = Registry("wconfd")
        self.clients = ClientRegistry(self._holds_anything, self._client_died, sweep_interval)
        self._init_lock_waits()
        self._init_config()
        self.state = self._load()
        self.locks = self._restore_locks()

    def _load(self) -> DurableState:
        try:
            return recover(
                self.store,
                initial=lambda: DurableState.fresh(time.time()),
                from_snapshot=DurableState.from_snapshot,
                apply=DurableState.apply,
                to_snapshot=DurableState.snapshot_json,
            )
        except StorageCorruptError as exc:
            raise StartupError(f"{exc}; restore the state directory from a backup") from None
        except Exception as exc:
            raise StartupError(
                f"cannot rebuild the state from {self.store.directory}: {exc}"
            ) from None

    def _restore_locks(self) -> LockManager:
        """Keep the locks and reservations of clients that still live; release the rest."""
        owners = set(self.state.locks) | set(self.state.reservations.owners())
        alive: dict[str, list[list[str]]] = {}
        for owner in sorted(owners):
            try:
                job_id, name, key = parse_client_id(owner)
            except ValueError:
                live = False
            else:
                live = is_alive(key)
            if live:
                self.clients.adopt(owner, job_id, name, key)
                alive[owner] = [[lock, mode] for lock, mode in self.state.locks.get(owner, [])]
                continue
            log.info("client %s died while wconfd was down; releasing what it held", owner)
            if owner in self.state.locks:
                self.store.append_sync(HeldLocks(client_id=owner, locks=[]))
                self.state.apply(HeldLocks(client_id=owner, locks=[]))
            released = self.state.reservations.remove_owner(owner)
            if released is not None:
                self.store.append_sync(released)
                self.state.apply(released)
        try:
            return LockManager.restore({o: held for o, held in alive.items() if held})
        except RestoreError as exc:
            raise StartupError(f"stored lock state is inconsistent: {exc}") from None

    def start(self) -> None:
        """Begin background work: watch the restored clients and sweep for deaths."""
        self.clients.watcher.start()

    def close(self) -> None:
        """Stop background work and close the store."""
        self.clients.watcher.stop()
        self.store.close()

    def guard(self, conn: Connection, spec: MethodSpec) -> None:
        """Every method but identify/ping/version needs an identified connection."""
        if spec.options.identified:
            self.clients.require(conn)

    def disconnected(self, conn: Connection) -> None:
        """A connection closed: forget its client if it was the last and holds nothing."""
        self.clients.disconnected(conn)

    async def persist_owners(self, owners: Iterable[str]) -> None:
        """Journal the current holdings of each owner (before answering anyone)."""
        records = [
            HeldLocks(client_id=owner, locks=[(lk, mode) for lk, mode in self.locks.held_by(owner)])
            for owner in owners
        ]
        if len(records) == 1:  # the common case: no task for one record
            await self.commit(records[0])
        else:  # appended in one loop round, so one journal write carries them all
            await asyncio.gather(*(self.commit(record) for record in records))

    def durable_locks(self) -> dict[str, list[tuple[str, str]]]:
        """Every client's holdings as the journal has them."""
        return self.state.locks

    def _holds_anything(self, client_id: str) -> bool:
        return self.holds_locks(client_id) or self.state.reservations.count(client_id) > 0

    def _client_died(self, client_id: str) -> None:
        self.release_owner(client_id)
        if self.state.reservations.count(client_id):
            self.spawn(self.drop_reservations(client_id))

    # -- identification ----------------------------------------------------------------

    async def identify(
        self, conn: Connection, job_id: int | None, pid: int, start_time: float, name: str | None
    ) -> Identity:
        client = self.clients.identify(conn, job_id, pid, start_time, name)
        return Identity(client_id=client.client_id)

    async def list_clients(self, conn: Connection) -> list[ClientInfo]:
        infos = []
        for client_id, client in sorted(self.clients.clients.items()):
            pending = self.locks.pending_request(client_id)
            infos.append(
                ClientInfo(
                    client_id=client_id,
                    job_id=client.job_id,
                    name=client.name,
                    pid=client.key.pid,
                    start_time=client.key.start_time,
                    locks=self.list_locks_of(client_id),
                    reservations=[
                        (ns, v) for _, ns, v in self.state.reservations.list_reservations(client_id)
                    ],
                    connections=len(client.connections),
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
