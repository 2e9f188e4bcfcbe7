"""Recording audited calls (docs/contracts.md#audit-log): the shell around client.audit.

The dispatcher opens an `AuditCall` for every call of a method declared with `audit=`
(parameters decoded and valid) and makes it the task's `current()` call.  A daemon whose
change goes to its store may take the call's entry into the same durable write
(`AuditCall.ride`): then the audit costs no write of its own.  Otherwise, once the method
returns or raises, the dispatcher hands the entries to the daemon's `AuditBook` and waits
until they are durable before answering.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass
from typing import Any, Protocol

from client.audit import ACTING, RETENTION_DAYS, AuditEntry, Daemon, Query, actor_of


class AuditCall:
    """One audited call in flight: who (peer uid/pid, actor, own job), what, and whether
    its entries are durable yet.  The daemon may name the target more exactly, give the
    object's serials, or list one target per member (submit_many_jobs)."""

    __slots__ = (
        "actor", "daemon", "job_id", "members", "method", "pid", "recorded", "serial",
        "taken", "target", "uid",
    )  # fmt: skip

    def __init__(  # positional: one is made for every audited call
        self,
        daemon: Daemon,
        method: str,
        actor: str | None,
        uid: int,
        pid: int,
        job_id: int | None,
        target: str,
    ) -> None:
        self.daemon: Daemon = daemon
        self.method = method
        self.actor = actor_of(actor, uid)
        self.uid = uid
        self.pid = pid
        self.job_id = job_id
        self.target = target
        self.serial: list[int | None] | None = None
        self.members: list[tuple[str, str]] | None = None  # (target, outcome) each
        self.taken = False  # a store's write carries the entries
        self.recorded = False  # the entries are durable

    def entries(self, outcome: str, ts: float) -> list[AuditEntry]:
        """The call's entries (seq 0: the store numbers them): one, or one per member,
        each member's own outcome where it has one."""
        if self.members is not None:
            return [self._entry(target, own, ts, None) for target, own in self.members]
        return [self._entry(self.target, outcome, ts, self.serial)]

    def take(self) -> bool:
        """Whether a store's write of this call may carry its entries: the first one asks
        and gets true (its entries are then built with `ride`), later ones false."""
        taken, self.taken = self.taken or self.recorded, True
        return not taken

    def ride(self, ts: float) -> list[AuditEntry]:
        """The call's entries for a change about to be written (outcome ok), to go in the
        same durable write; the store sets `recorded` once that write is durable, and
        gives the call back (`taken` false) if it fails."""
        return self.entries("ok", ts)

    def _entry(
        self, target: str, outcome: str, ts: float, serial: list[int | None] | None
    ) -> AuditEntry:
        return AuditEntry(
            0, ts, self.daemon, self.actor, self.uid, self.pid, self.job_id, self.method,
            target, outcome, serial,
        )  # fmt: skip


log = logging.getLogger(__name__)


def current() -> AuditCall | None:
    """The audited call this task serves (None outside one)."""
    call = ACTING.get()
    return call if isinstance(call, AuditCall) else None


class AuditBook(Protocol):
    """Where a daemon keeps its entries (its own store: journal, SQLite or etcd)."""

    def record(self, entries: list[AuditEntry]) -> Awaitable[None]:
        """Number `entries` and make them durable (StorageError if they cannot be)."""
        ...

    def query(self, query: Query) -> Awaitable[list[AuditEntry]]:
        """The entries `query` asks for, newest last."""
        ...


@dataclass(frozen=True)
class AuditSettings:
    """A daemon's audit options: `--audit-retention DAYS`, and `--no-audit` (only to
    measure what auditing costs)."""

    days: float = RETENTION_DAYS
    enabled: bool = True

    @classmethod
    def from_args(cls, args: Any) -> AuditSettings:
        """From the parsed daemon options (client._server.runner.daemon_parser)."""
        return cls(args.audit_retention, not args.no_audit)


@dataclass(frozen=True)
class Auditing:
    """What the dispatcher needs to audit a daemon's calls: its name, its book, the
    clock, and how to find the caller's own job (None when it has none)."""

    daemon: Daemon
    book: AuditBook
    job_of: Callable[[Any, Any], int | None]  # (connection, guard's caller) -> job id
    clock: Callable[[], float]

    async def around(
        self,
        method: str,
        conn: Any,
        caller: Any,
        actor: str | None,
        target: str,
        impl: Callable[..., Coroutine[Any, Any, Any]],
        values: list[Any],
    ) -> Any:
        """Run `impl(caller, *values)` as the task's current audited call; record its
        entries (unless its change carried them) before its answer, with its error type
        when it fails."""
        peer = conn.peer
        call = AuditCall(
            self.daemon, method, actor, peer.uid, peer.pid, self.job_of(conn, caller), target
        )
        # Set for the call only (the context is its request's own: a task's, or on Python
        # 3.11 the server's per-request context), and reset before its entries are
        # recorded, so that write is never taken for the call's own.  Its calls to other
        # daemons act for the same actor (client.audit.ACTING).
        token = ACTING.set(call)
        try:
            result = await impl(caller, *values)
        except Exception as exc:  # a cancelled call (its caller gone) is not answered
            failure: Exception | None = exc
        else:
            failure = None
        finally:
            ACTING.reset(token)
        if not call.recorded:
            call.taken = True  # a write the call left running never carries it now
            outcome = "ok" if failure is None else _outcome(failure)
            try:
                await self.book.record(call.entries(outcome, self.clock()))
            except Exception as exc:
                if failure is None:
                    raise  # a change is never answered ok without its entry
                log.warning("%s failed (%s) and its audit entry too: %s", method, outcome, exc)
            else:
                call.recorded = True
        if failure is not None:
            raise failure
        return result


class AuditQueries:
    """`query_audit` over the book a daemon serves now (it may change with each term)."""

    def __init__(self, book: Callable[[], AuditBook | None]) -> None:
        self._book = book

    async def query_audit(
        self,
        caller: Any,
        since: float | None,
        until: float | None,
        actor: str | None,
        target: str | None,
        limit: int,
    ) -> list[AuditEntry]:
        book = self._book()
        if book is None:
            return []
        # In a task of its own: an etcd read times out with asyncio.timeout, which needs
        # one (on Python 3.11 the server takes a call's first step outside any task).
        query = Query(since, until, actor, target, limit)
        return await asyncio.get_running_loop().create_task(_read(book, query))


async def _read(book: AuditBook, query: Query) -> list[AuditEntry]:
    return await book.query(query)


def failover_entry(daemon: Daemon, node: str) -> AuditEntry:
    """The entry a daemon of a new master records (docs/contracts.md#audit-log): this
    node took over, told by this process."""
    return AuditEntry(0, time.time(), daemon, f"node:{node}", os.getuid(), os.getpid(), None,
                      "failover", f"node/{node}", "ok")  # fmt: skip


def _outcome(exc: BaseException) -> str:
    """An entry's outcome for a call that raised: the error's wire type."""
    type_name = getattr(exc, "type_name", None)
    return type_name if isinstance(type_name, str) else "InternalError"
