"""Durable config and reservations: the pure cores of `wconfd.config` joined to a store.

The live write path of SPEC §5, ready for the RPC layer: plan (validate) → enforce locks →
persist → apply, serialised per state (plans read the state they change), with snapshots
taken in the background when the journal outgrows its bound.  Reads go straight to
`.state` / `.table` (pure, O(1)).

    config = ConfigStore.open(state_dir, now=time.time())
    written = await config.update_object("node", obj, time.time(), holds_exclusive=held)
    written.result, written.warning    # warning: lock enforcement in "warn" mode
    config.state.get_config_json()     # bytes; reply with msgspec.Raw(...)

StorageError: nothing was persisted and memory is unchanged.  LockNotHeld and the
validation errors are raised before anything is written.
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
from collections.abc import Callable
from typing import Any, NamedTuple

from wconfd.config import (
    ConfigChange,
    ConfigDocument,
    ConfigState,
    Plan,
    ReservationChange,
    ReservationSnapshot,
    ReservationTable,
    check_kind,
    check_locks,
)
from wconfd.config.reservations import RandomBits
from wconfd.config.state import UuidFactory, new_uuid4

from .store import LocalStore, recover

log = logging.getLogger("wconfd.storage")

HoldsExclusive = Callable[[str], bool]


class Written(NamedTuple):
    """A config write's RPC result and, in "warn" mode, the lock warning to log."""

    result: Any
    warning: str | None


class _Durable:
    """Shared plumbing: one asyncio.Lock per state, persist-then-apply, background
    snapshots."""

    def __init__(self, store: LocalStore[Any, Any]) -> None:
        self.store = store
        self.lock = asyncio.Lock()
        self._snapshot_task: asyncio.Future[bool] | None = None

    def _snapshot_state(self) -> bytes | Any:
        """The state to snapshot, captured now."""
        raise NotImplementedError

    def _maybe_snapshot(self) -> None:
        """Start a background snapshot if the journal is over its bound."""
        if self.store.snapshot_due and (self._snapshot_task is None or self._snapshot_task.done()):
            self._snapshot_task = self.store.snapshot(self._snapshot_state())
            self._snapshot_task.add_done_callback(_log_snapshot_failure)

    async def aclose(self) -> None:
        """Finish a running snapshot and pending writes, then close the store."""
        if self._snapshot_task is not None:
            await asyncio.gather(self._snapshot_task, return_exceptions=True)
        await self.store.aclose()


def _log_snapshot_failure(task: asyncio.Future[bool]) -> None:
    """Background snapshots report failures in the log (the journal stays valid)."""
    if not task.cancelled() and task.exception() is not None:
        log.error("background snapshot failed: %s", task.exception())


class ConfigStore(_Durable):
    """The configuration with its journal and snapshots (`config.journal`,
    `config.snapshot.json` in the state directory)."""

    def __init__(self, store: LocalStore[ConfigDocument, ConfigChange], state: ConfigState):
        super().__init__(store)
        self.state = state

    @classmethod
    def open(
        cls,
        directory: str | os.PathLike[str],
        *,
        now: float,
        new_uuid: UuidFactory = new_uuid4,
        **store_options: Any,
    ) -> ConfigStore:
        """Load (or create: cluster "lockwarden", group "default", snapshot at once) the
        config.  Raises SnapshotCorruptError / JournalCorruptError /
        ConfigValidationError when the stored config cannot be trusted."""
        store = LocalStore[ConfigDocument, ConfigChange](
            directory,
            "config",
            snapshot_type=ConfigDocument,
            record_type=ConfigChange,
            **store_options,
        )
        state = recover(
            store,
            initial=lambda: ConfigState.fresh(now, new_uuid),
            from_snapshot=ConfigState,
            apply=ConfigState.apply,
            to_snapshot=ConfigState.get_config_json,
        )
        return cls(store, state)

    def _snapshot_state(self) -> bytes:
        return self.state.get_config_json()

    async def _write(
        self, kind: str, make: Callable[[], Plan], holds_exclusive: HoldsExclusive | None
    ) -> Written:
        """Plan, check locks, persist, apply - one write at a time."""
        async with self.lock:
            plan = make()
            warning = None
            if holds_exclusive is not None:
                warning = check_locks(
                    check_kind(kind),
                    plan.locks,
                    holds_exclusive,
                    self.state.cluster.lock_enforcement,
                )
            if plan.record is not None:
                await self.store.append(plan.record, on_durable=self.state.apply)
                self._maybe_snapshot()
            return Written(plan.result, warning)

    async def add_object(
        self,
        kind: str,
        obj: object,
        now: float,
        *,
        holds_exclusive: HoldsExclusive | None = None,
        new_uuid: UuidFactory = new_uuid4,
    ) -> Written:
        """ConfigState.add_object, durable.  `holds_exclusive` None skips enforcement."""
        return await self._write(
            kind,
            lambda: self.state.add_object(kind, obj, now, new_uuid=new_uuid),
            holds_exclusive,
        )

    async def update_object(
        self,
        kind: str,
        obj: object,
        now: float,
        *,
        holds_exclusive: HoldsExclusive | None = None,
        new_uuid: UuidFactory = new_uuid4,
    ) -> Written:
        """ConfigState.update_object, durable."""
        return await self._write(
            kind,
            lambda: self.state.update_object(kind, obj, now, new_uuid=new_uuid),
            holds_exclusive,
        )

    async def remove_object(
        self, kind: str, key: object, now: float, *, holds_exclusive: HoldsExclusive | None = None
    ) -> Written:
        """ConfigState.remove_object, durable."""
        return await self._write(
            kind, lambda: self.state.remove_object(kind, key, now), holds_exclusive
        )


class ReservationStore(_Durable):
    """The reservation table with its journal and snapshots (`reservations.*`)."""

    def __init__(
        self, store: LocalStore[ReservationSnapshot, ReservationChange], table: ReservationTable
    ) -> None:
        super().__init__(store)
        self.table = table
        self.rng: RandomBits = random.SystemRandom()

    @classmethod
    def open(cls, directory: str | os.PathLike[str], **store_options: Any) -> ReservationStore:
        """Load (or create empty) the reservation table."""
        store = LocalStore[ReservationSnapshot, ReservationChange](
            directory,
            "reservations",
            snapshot_type=ReservationSnapshot,
            record_type=ReservationChange,
            **store_options,
        )
        table = recover(
            store,
            initial=ReservationTable,
            from_snapshot=ReservationTable.from_snapshot,
            apply=ReservationTable.apply,
        )
        return cls(store, table)

    def _snapshot_state(self) -> ReservationSnapshot:
        return self.table.snapshot()

    async def _commit(self, make: Callable[[], ReservationChange | None]) -> None:
        """Plan, persist, apply - one change at a time."""
        async with self.lock:
            record = make()
            if record is not None:
                await self.store.append(record, on_durable=self.table.apply)
                self._maybe_snapshot()

    async def reserve(
        self,
        owner: str,
        namespace: str,
        value: str,
        *,
        in_config: Callable[[str], bool] | None = None,
    ) -> None:
        """ReservationTable.reserve, durable (pass ConfigState.mac_in_use as in_config)."""
        await self._commit(lambda: self.table.reserve(owner, namespace, value, in_config=in_config))

    async def release_reservation(self, owner: str, namespace: str, value: str) -> None:
        """ReservationTable.release_reservation, durable."""
        await self._commit(lambda: self.table.release_reservation(owner, namespace, value))

    async def release_reservations(self, owner: str, namespace: str | None = None) -> None:
        """ReservationTable.release_reservations, durable."""
        await self._commit(lambda: self.table.release_reservations(owner, namespace))

    async def remove_owner(self, owner: str) -> None:
        """Drop everything a dead client reserved, durable."""
        await self._commit(lambda: self.table.remove_owner(owner))

    async def generate_mac(
        self, owner: str, prefix: str, *, in_config: Callable[[str], bool] | None = None
    ) -> str:
        """A free MAC with `prefix`, reserved for `owner` durably."""
        macs: list[str] = []

        def make() -> ReservationChange:
            mac, record = self.table.generate_mac(owner, prefix, self.rng, in_config=in_config)
            macs.append(mac)
            return record

        await self._commit(make)
        return macs[0]
