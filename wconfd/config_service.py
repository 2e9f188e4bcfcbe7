"""wconfd's configuration and reservation methods (SPEC §5, §5.1): the shell around
ConfigState and ReservationTable.

Every write is planned against the current state, checked for the locks it needs,
made durable, and only then applied to memory (the store's `on_durable`), so a failed
write (StorageError) leaves the state as it was.  Writes are serialised: a plan reads
the state the previous write left.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import msgspec

from client.api.wconfd import Kind, UpdateResult
from client.daemon.server import Connection
from client.errors import InvalidParams
from wconfd.clients import ClientRegistry
from wconfd.config import check_kind, check_locks
from wconfd.config.state import Plan
from wconfd.durable import DurableState, Record
from wconfd.locking import EXCLUSIVE, LockManager
from wconfd.storage.store import LocalStore

log = logging.getLogger(__name__)


class ConfigMethods:
    """The §5 and §5.1 methods; mixed into WConfdService, which provides the state."""

    clients: ClientRegistry
    locks: LockManager
    state: DurableState
    store: LocalStore[Any, Record]

    def _init_config(self) -> None:
        self._write_lock = asyncio.Lock()
        self._config_changed = asyncio.Event()

    async def commit(self, record: Record) -> None:
        """Make `record` durable, then apply it to memory; snapshot when the journal is long."""
        await self.store.append(record, on_durable=self.state.apply)
        if self.store.snapshot_due:
            asyncio.get_running_loop().create_task(self._snapshot())

    async def _snapshot(self) -> None:
        try:
            await self.store.snapshot(self.state.snapshot_json())
        except Exception as exc:  # the old snapshot and journal stay valid
            log.error("snapshot failed (will retry after the next write): %s", exc)

    def _notify_config_change(self) -> None:
        self._config_changed.set()
        self._config_changed = asyncio.Event()

    async def _write(self, conn: Connection, kind: str, plan_of: Any) -> Any:
        """Plan, enforce locks, persist, apply, wake watchers; the plan's result."""
        owner = self.clients.require(conn).client_id
        async with self._write_lock:
            plan: Plan = plan_of(time.time())
            if plan.record is None:
                return plan.result
            self._enforce(owner, kind, plan)
            await self.commit(plan.record)
        self._notify_config_change()
        return plan.result

    def _enforce(self, owner: str, kind: str, plan: Plan) -> None:
        def holds_exclusive(lock: str) -> bool:
            return self.locks.allocation.mode_of(owner, lock) == EXCLUSIVE

        warning = check_locks(
            check_kind(kind),
            plan.locks,
            holds_exclusive,
            self.state.config.cluster.lock_enforcement,
        )
        if warning:
            log.warning("%s: %s", owner, warning)

    # -- reads -------------------------------------------------------------------------

    async def get_config(self, conn: Connection) -> Any:
        return msgspec.Raw(self.state.config.get_config_json())

    async def get_object(self, conn: Connection, kind: Kind, key: str | None) -> Any:
        if key is None and kind != "cluster":
            raise InvalidParams(f"param `key`: a {kind} is found by uuid or name; give one")
        return self.state.config.get_object(kind, key)

    async def list_objects(self, conn: Connection, kind: Kind) -> list[Any]:
        return list(self.state.config.list_objects(kind))

    async def wait_config_change(self, conn: Connection, since_serial: int, timeout: float) -> int:
        if timeout < 0:
            raise InvalidParams("param `timeout`: must be >= 0")
        deadline = time.monotonic() + timeout
        while self.state.config.serial_no <= since_serial:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                await asyncio.wait_for(self._config_changed.wait(), left)
            except TimeoutError:
                break
        return self.state.config.serial_no

    # -- writes ------------------------------------------------------------------------

    async def add_object(self, conn: Connection, kind: Kind, object: dict[str, Any]) -> Any:
        return await self._write(
            conn, kind, lambda now: self.state.config.add_object(kind, object, now)
        )

    async def update_object(
        self,
        conn: Connection,
        kind: Kind,
        object: dict[str, Any],
    ) -> UpdateResult:
        result = await self._write(
            conn, kind, lambda now: self.state.config.update_object(kind, object, now)
        )
        return UpdateResult(serial_no=result["serial_no"], mtime=result["mtime"])

    async def remove_object(self, conn: Connection, kind: Kind, key: str) -> None:
        await self._write(conn, kind, lambda now: self.state.config.remove_object(kind, key, now))

    # -- reservations ------------------------------------------------------------------

    async def reserve(self, conn: Connection, namespace: str, value: str) -> None:
        owner = self.clients.require(conn).client_id
        async with self._write_lock:
            record = self.state.reservations.reserve(
                owner, namespace, value, in_config=self.state.config.mac_in_use
            )
            if record is not None:
                await self.commit(record)

    async def release_reservation(self, conn: Connection, namespace: str, value: str) -> None:
        owner = self.clients.require(conn).client_id
        async with self._write_lock:
            record = self.state.reservations.release_reservation(owner, namespace, value)
            if record is not None:
                await self.commit(record)

    async def release_reservations(self, conn: Connection, namespace: str | None) -> None:
        owner = self.clients.require(conn).client_id
        await self.drop_reservations(owner, namespace)

    async def drop_reservations(self, owner: str, namespace: str | None = None) -> None:
        """Release `owner`'s reservations (of one namespace, or all)."""
        async with self._write_lock:
            record = self.state.reservations.release_reservations(owner, namespace)
            if record is not None:
                await self.commit(record)

    async def generate_mac(self, conn: Connection) -> str:
        owner = self.clients.require(conn).client_id
        async with self._write_lock:
            mac, record = self.state.reservations.generate_mac(
                owner,
                self.state.config.cluster.mac_prefix,
                in_config=self.state.config.mac_in_use,
            )
            await self.commit(record)
        return mac

    async def list_reservations(self, conn: Connection) -> list[tuple[str, str, str]]:
        return [(o, ns, v) for o, ns, v in self.state.reservations.list_reservations()]
