"""The audit log's vocabulary (docs/contracts.md#audit-log): one entry's shape, who acts,
and what a query asks for.  Shared by the daemons that write entries, lw-rapi and `lw`
that read them; pure, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from contextvars import ContextVar
from typing import Final, Literal, Protocol

import msgspec

ACTOR_MAX: Final = 128

RETENTION_DAYS: Final = 90.0
"""Entries older than this are dropped (`--audit-retention DAYS`)."""
RETENTION_COUNT: Final = 1_000_000
"""At most this many entries are kept per daemon (the newest)."""
DEFAULT_LIMIT: Final = 1000
MAX_LIMIT: Final = 100_000

Daemon = Literal["wconfd", "luxid", "rapi"]


class Acting(Protocol):
    """Anything that names whom the code running now acts for (a daemon's audited call)."""

    actor: str


ACTING: ContextVar[Acting | None] = ContextVar("lw_acting", default=None)
"""What the code running now acts for: set by a daemon for the length of an audited call
(the call itself, one variable for both uses), so the calls it makes on that caller's
behalf (luxid's writes to wconfd) name the same actor (the stubs fill it in where a call
names none)."""


def acting_for() -> str | None:
    """The actor the code running now acts for (None: its own)."""
    acting = ACTING.get()
    return None if acting is None else acting.actor


class AuditEntry(msgspec.Struct, frozen=True, omit_defaults=True):
    """One audited call: `seq` (per daemon, increasing), when, which daemon, who acts for
    whom (`actor`; the peer's `uid`/`pid` from SO_PEERCRED), the caller's own job, the
    method, the object (`target`), `"ok"` or the error type, and the object's serial
    before and after where it has one.  Made with `seq` 0; the store numbers it
    (`msgspec.structs.replace`) as it queues it."""

    seq: int
    ts: float
    daemon: Daemon
    actor: str
    uid: int
    pid: int
    job_id: int | None
    method: str
    target: str
    outcome: str
    serial: list[int | None] | None = None


def number_entries(entries: Iterable[AuditEntry], last: int) -> list[AuditEntry]:
    """`entries` numbered one above `last`, in order; an entry that has its seq already
    (one a copy carries from another store) keeps it."""
    numbered = []
    for entry in entries:
        if entry.seq <= 0:
            last += 1
            entry = msgspec.structs.replace(entry, seq=last)
        numbered.append(entry)
    return numbered


def actor_of(actor: str | None, uid: int) -> str:
    """The actor an entry names: the caller's word, else `uid:<uid>`."""
    return actor if actor is not None else f"uid:{uid}"


class Query(msgspec.Struct, frozen=True):
    """What `query_audit` asks: `since <= ts < until`, actor and target exactly, the
    newest `limit` (answered newest last)."""

    since: float | None = None
    until: float | None = None
    actor: str | None = None
    target: str | None = None
    limit: int = DEFAULT_LIMIT

    def matches(self, entry: AuditEntry) -> bool:
        """Whether `entry` is one this query asks for (the limit aside)."""
        return (
            (self.since is None or entry.ts >= self.since)
            and (self.until is None or entry.ts < self.until)
            and (self.actor is None or entry.actor == self.actor)
            and (self.target is None or entry.target == self.target)
        )


def merged(parts: Sequence[Sequence[AuditEntry]], limit: int) -> list[AuditEntry]:
    """Several daemons' answers as one list by `ts` (then daemon, then seq), newest last,
    the newest `limit` kept."""
    rows = sorted(
        (entry for part in parts for entry in part),
        key=lambda e: (e.ts, e.daemon, e.seq),
    )
    return rows[-limit:] if limit > 0 else []


def object_target(kind: str, name: str) -> str:
    """An object's target: its lock name (`instance/web1`, `cluster`, `filter/<uuid>`)."""
    return "cluster" if kind == "cluster" else f"{kind}/{name}"
