"""wconfd's persistence: the one owner of the store, the durable state, group commit,
snapshots and the config-changed event.  The lock, config and reservation services
receive it; none of them touches the store.  Here too: opening wconfd's local store
(`open_local_store`) and rebuilding the durable state from any store
(`load_durable_state`).

Two write paths, one journal:

- `commit(records)`: records planned outside the planned-write queue (lock changes; they
  neither read nor change what config and reservation plans read).  Records given
  together go to disk in one write.
- `submit(plan)`: config and reservation writes.  Calls queue their plan; one writer task
  takes every queued write, plans them in order - each against the state the previous
  ones will leave, by applying it tentatively (`apply_undoable`) - then reverts the
  tentative changes and queues all the records with no await in between, so they reach
  the disk in one write and become visible only once durable.  Readers never see a state
  that is not on disk.  A plan that raises answers only its own call.  If the write
  fails, every write of the group fails with StorageError, including the ones whose
  answer (an error, an idempotent retry) was planned on top of a failed record.  The
  next group is planned once the previous one is durable and applied.

Every planned record is encoded (`check_record`) before it joins a batch, so a record
that cannot be stored fails its own call with InvalidParams and never the batch it would
have shared (one client's bad write never fails another's, docs/contracts.md#numbers).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from client._server.audit import AuditCall
from client._server.audit import current as current_audit
from client.errors import InvalidParams, StorageError
from client.events import Retention
from wconfd.audit_log import WconfdAudit, change_facts
from wconfd.config.numbers import unstorable_number
from wconfd.config.records import ConfigChange
from wconfd.config.reservations import Release, ReleaseAll, Reserve
from wconfd.durable_state import AuditNote, DurableState, Record, Snapshot
from wconfd.storage.gc_pause import gc_paused
from wconfd.storage.seam import DurableStore, recover
from wconfd.storage.store import LocalStore

log = logging.getLogger(__name__)

# Most writes planned into one group (one disk write); the rest wait for the next.
MAX_GROUP: Final = 1024

# A write's plan: given the time, the record to persist (None: nothing to write) and the
# call's result.  It raises the call's error (it runs in the writer task).
PlanFn = Callable[[float], tuple[Record | None, Any]]


class _Write(NamedTuple):
    """A queued write: its plan, the caller's future, and the caller's audited call (its
    entry is journalled with the write's record)."""

    plan: PlanFn
    fut: asyncio.Future[Any]
    audit: AuditCall | None = None


class _Staged(NamedTuple):
    """A planned write whose record joins the group's disk write, with its audit note."""

    write: _Write
    record: Record
    result: Any
    note: AuditNote | None


_ENCODER: Final = msgspec.msgpack.Encoder()


def check_record(record: Record) -> None:
    """InvalidParams naming the offending value if `record` cannot be journalled (the
    edges check numbers first; this keeps a record that slipped past them out of a
    batch it would fail for everyone)."""
    try:
        _ENCODER.encode(record)
    except OverflowError:
        problem = unstorable_number(msgspec.to_builtins(record), "record")
        raise InvalidParams(problem or "the change holds a number too large to store") from None
    except (TypeError, ValueError) as exc:
        raise InvalidParams(f"the change cannot be stored: {exc}") from None


class Persistence:
    """The store, the state it rebuilds, and the only ways to change that state."""

    def __init__(self, store: DurableStore[Snapshot, Record], state: DurableState) -> None:
        self.store = store
        self.state = state
        # Told when a durable record added events (wakes watch_events; set by wconfd.service).
        self.on_events: Callable[[], None] | None = None
        # The audit log the notes go to (docs/contracts.md#audit-log; None: no auditing).
        self.audit: WconfdAudit | None = None
        self._writes: list[_Write] = []
        self._writer: asyncio.Task[None] | None = None
        self._snapshot_task: asyncio.Task[None] | None = None
        self._config_changed = asyncio.Event()

    # -- direct commits ------------------------------------------------------------------

    async def commit(
        self, records: Sequence[Record], then: Callable[[], object] | None = None
    ) -> None:
        """Make `records` durable in one write (all or none), then apply them to memory.

        `then()` runs right after they are applied, in the same loop step as the write's
        completion, before this call resumes: lock grants answered there reach their
        waiters a few loop rounds sooner (the next holder is on the lock's critical path).
        The records share one batch (queued with no await between them): the last one
        completes last, so awaiting it first costs no extra loop rounds.

        For lock changes: names and modes only, which always encode, so they skip
        `check_record` (the store encodes each record once, before queueing it)."""
        apply = self._apply
        *first, last = records
        earlier = [self.store.append_nowait(record, on_durable=apply) for record in first]
        if then is not None:

            def apply_then(record: Record) -> None:
                apply(record)
                then()

        done = self.store.append_nowait(last, on_durable=apply if then is None else apply_then)
        try:
            await done
        except BaseException:
            for fut in earlier:  # the batch failed as a whole: their errors are this one
                if fut.done() and not fut.cancelled():
                    fut.exception()
            raise
        for fut in earlier:  # done with the last (one batch); a lone failure still counts
            await fut
        self._maybe_snapshot()

    def commit_sync(self, record: Record) -> None:
        """Blocking commit, for start-up (no event loop writes yet)."""
        self.store.append_sync(record)
        self._apply(record)

    def _apply(self, record: Record) -> None:
        """Apply a durable record to memory; say so if it added events."""
        if isinstance(record, AuditNote):
            if self.audit is not None:
                self.audit.durable(record)
            if record.change is None:
                return
            record = record.change
        events = self.state.events
        last = events.last
        self.state.apply(record)
        if events.last != last and self.on_events is not None:
            self.on_events()

    def _maybe_snapshot(self) -> None:
        if self.store.snapshot_due and (self._snapshot_task is None or self._snapshot_task.done()):
            self._snapshot_task = asyncio.get_running_loop().create_task(self._snapshot())

    async def _snapshot(self) -> None:
        try:
            # The state and its seq now; the audit file must hold every note up to that
            # seq durably before the snapshot lets the journal drop them.
            body, seq = self.state.snapshot_json(), self.store.durable_seq
            if self.audit is not None:
                await self.audit.before_compaction()
            await self.store.snapshot(body, seq)
        except Exception as exc:  # the old snapshot and journal stay valid
            log.error("snapshot failed (will retry after the next write): %s", exc)

    # -- config changes ------------------------------------------------------------------

    async def wait_config_change(self, since_serial: int, timeout: float) -> int:
        """The config's serial_no once it exceeds `since_serial`, or after `timeout` s."""
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

    def _notify_config_change(self) -> None:
        self._config_changed.set()
        self._config_changed = asyncio.Event()

    # -- planned writes -----------------------------------------------------------------

    async def submit(self, plan: PlanFn) -> Any:
        """Queue a planned write and wait for its answer (after its record is durable)."""
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[Any] = loop.create_future()
        call = current_audit()
        self._writes.append(_Write(plan, fut, call if call is not None and call.take() else None))
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
        staged: list[_Staged] = []
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
                    if record is not None:
                        check_record(record)
                except Exception as exc:
                    error, record = exc, None
                if record is not None:
                    staged.append(_Staged(write, record, result, self._note(write, record)))
                    unapplied = record
                elif staged:
                    after.append((write, error, result))
                else:
                    _answer(write.fut, error, result)
        finally:
            for revert in reversed(undo):
                revert()
        if staged:
            await self._persist_group(staged, after)

    def _note(self, write: _Write, record: Record) -> AuditNote | None:
        """The record journalled for an audited write: its change with its call's entry
        (outcome ok, naming the object and its serials, as planned), one record."""
        call = write.audit
        if call is None or self.audit is None:
            return None
        if isinstance(record, ConfigChange):
            call.target, call.serial = change_facts(self.state.config, record)
        assert isinstance(record, ConfigChange | Reserve | Release | ReleaseAll)
        return self.audit.note(call.ride(time.time()), record)

    def _noted(self, call: AuditCall) -> Callable[[Record], None]:
        """The on_durable of a write's audit note: keep it, and tell its call."""

        def durable(record: Record) -> None:
            call.recorded = True
            self._apply(record)

        return durable

    async def _persist_group(
        self,
        staged: list[_Staged],
        after: list[tuple[_Write, BaseException | None, Any]],
    ) -> None:
        try:
            futures = [
                self.store.append_nowait(record, on_durable=self._apply)
                if note is None or write.audit is None
                else self.store.append_nowait(note, on_durable=self._noted(write.audit))
                for write, record, _, note in staged
            ]
        except StorageError as exc:  # broken or closed store: nothing was queued
            failure: BaseException | None = exc
            outcomes: list[Any] = [exc] * len(staged)
        else:
            outcomes = await asyncio.gather(*futures, return_exceptions=True)
            failure = next((o for o in outcomes if isinstance(o, BaseException)), None)
        for (write, _, result, _), outcome in zip(staged, outcomes, strict=True):
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
        else:  # lock changes are committed directly, never planned here
            raise TypeError(f"unexpected record {record!r}")
        table.apply(record)

        def revert() -> None:
            for change in undo:
                table.apply(change)

        return revert

    def close(self) -> None:
        """Close the store (queued appends fail with StorageError)."""
        self.store.close()


def _answer(fut: asyncio.Future[Any], error: BaseException | None, result: Any) -> None:
    """Resolve a caller's future (unless it was cancelled meanwhile)."""
    if fut.done():
        return
    if error is not None:
        fut.set_exception(error)
    else:
        fut.set_result(result)


def open_local_store(state_dir: str | os.PathLike[str]) -> LocalStore[Snapshot, Record]:
    """wconfd's store in `state_dir` (wconfd.journal, wconfd.snapshot.json); not opened yet."""
    return LocalStore(state_dir, "wconfd", snapshot_type=Snapshot, record_type=Record)


def load_durable_state(
    store: DurableStore[Snapshot, Record],
    retention: Retention | None = None,
    on_audit: Callable[[AuditNote], object] | None = None,
) -> DurableState:
    """Open `store` and rebuild the state: snapshot + journal replay (a fresh directory
    gets the default config, fixed on disk at once), its events kept by `retention`; the
    journal's audit notes go to `on_audit`.  Storage errors propagate."""

    def replay(state: DurableState, records: list[Record]) -> None:
        if on_audit is not None:
            for record in records:
                if isinstance(record, AuditNote):
                    on_audit(record)
        state.replay(records)

    with gc_paused():
        return recover(
            store,
            initial=lambda: DurableState.fresh(time.time(), retention),
            from_snapshot=lambda snap: DurableState.from_snapshot(snap, retention),
            from_checked=lambda snap: DurableState.from_snapshot(snap, retention, checked=True),
            replay=replay,
            to_snapshot=DurableState.snapshot_json,
        )
