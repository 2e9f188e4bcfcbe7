"""wconfd's configuration and reservation methods (SPEC §5, §5.1): the shell around
ConfigState and ReservationTable.

Every write is planned against the current state, checked for the locks it needs,
made durable, and only then applied to memory (the store's `on_durable`), so a failed
write (StorageError) leaves the state as it was.

Writes are serialised but share disk flushes (group commit).  Calls queue their plan;
one writer task takes every queued write, plans them in order - each against the state
the previous ones will leave, by applying it tentatively (`apply_undoable`) - then reverts
the tentative changes and queues all the records with no await in between, so they reach
the disk in one write and become visible only once durable.  Readers never see a state
that is not on disk.  If that write fails, every write of the group fails with
StorageError, including the ones whose answer (an error, an idempotent retry) was
planned on top of a failed record.  The next group is planned once the previous one is
durable and applied.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import msgspec

from client.api.wconfd import Kind, UpdateResult
from client.daemon.server import Connection
from client.errors import InvalidParams, StorageError
from wconfd.clients import ClientRegistry
from wconfd.config import check_kind, check_locks
from wconfd.config.records import ConfigChange
from wconfd.config.reservations import Release, ReleaseAll, Reserve
from wconfd.config.state import Plan
from wconfd.durable import DurableState, Record
from wconfd.locking import EXCLUSIVE, LockManager
from wconfd.storage.store import LocalStore

log = logging.getLogger(__name__)

# Most writes planned into one group (one disk write); the rest wait for the next.
MAX_GROUP: Final = 1024

# A write's plan: given the time, the record to persist (None: nothing to write) and the
# call's result.  It raises the call's error (it runs in the writer task).
PlanFn = Callable[[float], tuple[Record | None, Any]]


class _Write(NamedTuple):
    """A queued write: its plan and the caller's future."""

    plan: PlanFn
    fut: asyncio.Future[Any]


class ConfigMethods:
    """The §5 and §5.1 methods; mixed into WConfdService, which provides the state."""

    clients: ClientRegistry
    locks: LockManager
    state: DurableState
    store: LocalStore[Any, Record]

    def _init_config(self) -> None:
        self._writes: list[_Write] = []
        self._writer: asyncio.Task[None] | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        self._config_changed = asyncio.Event()

    async def commit(self, record: Record) -> None:
        """Make `record` durable, then apply it to memory; snapshot when the journal is long.

        For records planned outside the config writer (lock holdings): they do not read
        or change what config and reservation plans read.
        """
        await self.store.append(record, on_durable=self.state.apply)
        self._maybe_snapshot()

    def _maybe_snapshot(self) -> None:
        if self.store.snapshot_due and (self._snapshot_task is None or self._snapshot_task.done()):
            self._snapshot_task = asyncio.get_running_loop().create_task(self._snapshot())

    async def _snapshot(self) -> None:
        try:
            await self.store.snapshot(self.state.snapshot_json())
        except Exception as exc:  # the old snapshot and journal stay valid
            log.error("snapshot failed (will retry after the next write): %s", exc)

    def _notify_config_change(self) -> None:
        self._config_changed.set()
        self._config_changed = asyncio.Event()

    # -- the writer ----------------------------------------------------------------------

    async def _submit(self, plan: PlanFn) -> Any:
        """Queue a write and wait for its answer (after its record is durable)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        self._writes.append(_Write(plan, fut))
        if self._writer is None or self._writer.done():
            self._writer = loop.create_task(self._run_writer())
        return await fut

    async def _run_writer(self) -> None:
        while self._writes:
            group, self._writes = self._writes[:MAX_GROUP], self._writes[MAX_GROUP:]
            try:
                await self._write_group(group)
            except Exception as exc:  # a bug: answer everyone, keep the daemon up
                log.exception("config writer failed")
                for write in group:
                    if not write.fut.done():
                        write.fut.set_exception(exc)

    async def _write_group(self, group: list[_Write]) -> None:
        """Plan `group` in order, persist its records as one write, answer every call."""
        staged: list[tuple[_Write, Record, Any]] = []
        # Answers planned on top of a staged record: given once that record is durable.
        after: list[tuple[_Write, BaseException | None, Any]] = []
        undo: list[Callable[[], None]] = []
        unapplied: Record | None = None
        try:
            for write in group:
                if write.fut.done():  # the caller went away before its turn
                    continue
                if unapplied is not None:  # the next plan must see the previous record
                    undo.append(self._apply_undoable(unapplied))
                    unapplied = None
                error: BaseException | None = None
                record: Record | None = None
                result: Any = None
                try:
                    record, result = write.plan(time.time())
                except Exception as exc:
                    error = exc
                if record is not None:
                    staged.append((write, record, result))
                    unapplied = record
                elif staged:
                    after.append((write, error, result))
                else:
                    _answer(write.fut, error, result)
        finally:
            for revert in reversed(undo):
                revert()
        if not staged:
            return
        try:
            futures = [
                self.store.append_nowait(record, on_durable=self.state.apply)
                for _, record, _ in staged
            ]
        except StorageError as exc:  # broken or closed store: nothing was queued
            failure: BaseException | None = exc
            outcomes: list[Any] = [exc] * len(staged)
        else:
            outcomes = await asyncio.gather(*futures, return_exceptions=True)
            failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
        for (write, _, result), outcome in zip(staged, outcomes, strict=True):
            _answer(write.fut, outcome if isinstance(outcome, BaseException) else None, result)
        for write, error, result in after:
            if failure is not None:
                error = StorageError(
                    f"an earlier write of the same group failed ({failure}); nothing was changed",
                    getattr(failure, "data", None),
                )
            _answer(write.fut, error, result)
        if any(not isinstance(o, BaseException) for o in outcomes):
            self._notify_config_change()
        self._maybe_snapshot()

    def _apply_undoable(self, record: Record) -> Callable[[], None]:
        """Apply a planned record to memory for the next plan; the function undoing it."""
        if isinstance(record, ConfigChange):
            config = self.state.config
            token = config.apply_undoable(record)
            return lambda: config.revert(token)
        table = self.state.reservations
        if isinstance(record, Reserve):
            undo: list[Any] = [
                Release(owner=record.owner, namespace=record.namespace, value=record.value)
            ]
        elif isinstance(record, Release):
            undo = [Reserve(owner=record.owner, namespace=record.namespace, value=record.value)]
        elif isinstance(record, ReleaseAll):
            undo = [
                Reserve(owner=owner, namespace=ns, value=value)
                for owner, ns, value in table.list_reservations(record.owner)
                if record.namespace is None or ns == record.namespace
            ]
        else:  # lock holdings are not planned here
            raise TypeError(f"unexpected record {record!r}")
        table.apply(record)

        def revert() -> None:
            for change in undo:
                table.apply(change)

        return revert

    def _config_plan(self, conn: Connection, kind: str, plan_of: Callable[[float], Plan]) -> PlanFn:
        """A config write's PlanFn: plan, then enforce the locks it needs."""
        owner = self.clients.require(conn).client_id

        def plan(now: float) -> tuple[Record | None, Any]:
            p = plan_of(now)
            if p.record is None:
                return None, p.result
            self._enforce(owner, kind, p)
            return p.record, p.result

        return plan

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
        config = self.state.config
        return await self._submit(
            self._config_plan(conn, kind, lambda now: config.add_object(kind, object, now))
        )

    async def update_object(
        self,
        conn: Connection,
        kind: Kind,
        object: dict[str, Any],
    ) -> UpdateResult:
        config = self.state.config
        result = await self._submit(
            self._config_plan(conn, kind, lambda now: config.update_object(kind, object, now))
        )
        return UpdateResult(serial_no=result["serial_no"], mtime=result["mtime"])

    async def remove_object(self, conn: Connection, kind: Kind, key: str) -> None:
        config = self.state.config
        await self._submit(
            self._config_plan(conn, kind, lambda now: config.remove_object(kind, key, now))
        )

    # -- reservations ------------------------------------------------------------------

    async def reserve(self, conn: Connection, namespace: str, value: str) -> None:
        owner = self.clients.require(conn).client_id
        await self._submit(
            lambda now: (
                self.state.reservations.reserve(
                    owner, namespace, value, in_config=self.state.config.mac_in_use
                ),
                None,
            )
        )

    async def release_reservation(self, conn: Connection, namespace: str, value: str) -> None:
        owner = self.clients.require(conn).client_id
        await self._submit(
            lambda now: (
                self.state.reservations.release_reservation(owner, namespace, value),
                None,
            )
        )

    async def release_reservations(self, conn: Connection, namespace: str | None) -> None:
        owner = self.clients.require(conn).client_id
        await self.drop_reservations(owner, namespace)

    async def drop_reservations(self, owner: str, namespace: str | None = None) -> None:
        """Release `owner`'s reservations (of one namespace, or all)."""
        await self._submit(
            lambda now: (self.state.reservations.release_reservations(owner, namespace), None)
        )

    async def generate_mac(self, conn: Connection) -> str:
        owner = self.clients.require(conn).client_id

        def plan(now: float) -> tuple[Record | None, Any]:
            mac, record = self.state.reservations.generate_mac(
                owner,
                self.state.config.cluster.mac_prefix,
                in_config=self.state.config.mac_in_use,
            )
            return record, mac

        result: str = await self._submit(plan)
        return result

    async def list_reservations(self, conn: Connection) -> list[tuple[str, str, str]]:
        return [(o, ns, v) for o, ns, v in self.state.reservations.list_reservations()]


def _answer(fut: asyncio.Future[Any], error: BaseException | None, result: Any) -> None:
    """Resolve a caller's future (unless it was cancelled meanwhile)."""
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)
