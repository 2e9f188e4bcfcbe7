"""Methods both daemons serve (docs/contracts.md#common-methods): ping, version,
get_metrics, get_role, and watch_events with the Event it answers
(docs/contracts.md#events)."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from client.api.declare import Api, Check, rpc
from client.api.numbers import Seconds
from client.audit import ACTOR_MAX, DEFAULT_LIMIT, MAX_LIMIT, AuditEntry
from client.errors import InvalidParams, StorageError

Topic = Literal["job", "drain", "filter", "budget", "queue", "lock", "config", "role"]
TOPICS: Final[tuple[str, ...]] = (
    "job", "drain", "filter", "budget", "queue", "lock", "config", "role",
)  # fmt: skip
DEFAULT_TOPICS: Final = frozenset(TOPICS) - {"lock"}
"""What a subscriber that names no topics follows: every topic but `lock`, whose events
are produced only while someone asks for them."""
MAX_EVENTS: Final = 10_000
"""The most events one watch_events answer carries (`limit`'s upper bound)."""


class VersionInfo(msgspec.Struct, frozen=True):
    """What `version` answers."""

    version: str
    protocol: int


class RoleInfo(msgspec.Struct, frozen=True):
    """What `get_role` answers."""

    node: str
    role: Literal["master", "standby"]
    master: str | None
    term: int


class Event(msgspec.Struct, frozen=True):
    """One change a daemon kept (docs/contracts.md#events): its index (strictly increasing,
    never repeated), when (epoch seconds), which daemon ("luxid" or "wconfd"), the topic,
    what happened (`action`), to what (`key`, e.g. "job/12", "instance/web1") and the
    details (`data`)."""

    index: int
    ts: float
    daemon: str
    topic: Topic
    action: str
    key: str
    data: dict[str, Any]


class EventBatch(msgspec.Struct, frozen=True):
    """What watch_events answers: the events after `after` (oldest first), the value to
    pass as the next `after`, and whether events after `after` are no longer kept."""

    events: list[Event]
    last: int
    gap: bool


BACKUPS: Final = "backups"
"""The folder of a daemon's state directory its `backup` writes under."""


def check_backup_dir(value: str) -> None:
    """InvalidParams naming `dir` unless `value` is a plain relative path below the
    daemon's backups folder: not empty, not absolute, no `..`, no NUL."""
    parts = [part for part in value.split("/") if part not in ("", ".")]
    problem = None
    if "\0" in value:
        problem = "holds a NUL character"
    elif value.startswith("/"):
        problem = "is an absolute path"
    elif ".." in parts:
        problem = "holds `..`"
    elif not parts:
        problem = "is empty"
    if problem is not None:
        raise InvalidParams(
            f"backup: param `dir` {problem}: give a relative path, written below the "
            f"daemon's state directory's {BACKUPS}/ folder",
            {"param": "dir"},
        )


BackupDir = Annotated[str, Check(check_backup_dir)]
"""A backup's folder below the daemon's `<state dir>/backups/`: relative, no `..`."""


class BackupPart(msgspec.Struct, frozen=True, omit_defaults=True):
    """What `backup` answers (docs/contracts.md#backups-and-store-copy): the folder the
    daemon wrote (absolute), each file's SHA-256 by name, and where the part stands:
    wconfd's configuration `serial`, luxid's `last_job_id` (the highest job id allocated
    at its snapshot; the part holds every job up to it).  Each daemon answers its own."""

    path: str
    files: dict[str, str]
    serial: int | None = None
    last_job_id: int | None = None


AuditActor = Annotated[str, Meta(min_length=1, max_length=ACTOR_MAX)] | None
"""The last param of every audited method (docs/contracts.md#audit-log): whom the caller
acts for (`rapi:<user>`, `cli:<login>`, `job:<id>`; null: the entry names `uid:<uid>`)."""


class CommonApi(Api):
    """The methods every Lockwarden socket answers, identified or not."""

    @rpc(identified=False, reissue=True)
    def ping(self) -> str:
        """Liveness check; answers "pong"."""

    @rpc(identified=False, reissue=True)
    def version(self) -> VersionInfo:
        """The daemon's software version and the protocol version (1)."""

    @rpc(identified=False, reissue=True)
    def get_metrics(self) -> dict[str, Any]:
        """The daemon's own counters, gauges and histograms (docs/contracts.md#observability),
        keyed by Prometheus name: a value, or [[{label: value}, value], ...]; a histogram as
        its _bucket (with `le`), _sum and _count series."""

    @rpc(identified=False, reissue=True)
    def get_role(self) -> RoleInfo:
        """This node's role in the control plane
        (docs/contracts.md#replicated-control-plane): its name, "master" or
        "standby", the master's node name (null while there is none) and the term (the
        leader key's create revision; 0 for a single node on local files). Answered on
        standbys too."""

    @rpc(InvalidParams, identified=False, reissue=True)
    def watch_events(
        self,
        after: Annotated[int, Meta(ge=0)],
        topics: list[Topic] | None = None,
        timeout: Seconds = 30,
        limit: Annotated[int, Meta(ge=1, le=MAX_EVENTS)] = 1000,
    ) -> EventBatch:
        """The daemon's events with an index above `after` (docs/contracts.md#events), at
        most `limit`, of the `topics` asked for (null: every topic but "lock"): at once
        when there are some, else as soon as one happens or when `timeout` s pass (then
        with none).  `last` is the next `after`: the last index returned, or the newest
        index the daemon has.  `gap` is true when events after `after` are no longer
        kept.  `after` above the newest index is InvalidParams (start from 0, or from a
        `last` this daemon answered).  Event-driven, never polled."""

    @rpc(InvalidParams, identified=False, pushes="events")
    def follow_events(
        self,
        after: Annotated[int, Meta(ge=0)],
        topics: list[Topic] | None = None,
        limit: Annotated[int, Meta(ge=1, le=MAX_EVENTS)] = 1000,
    ) -> EventBatch:
        """watch_events without the round trips (docs/contracts.md#following-events): the
        answer is the events after `after` now (as watch_events with timeout 0), and then
        the daemon sends on this connection a notification `events` (params: the same
        EventBatch shape) whenever events of `topics` after the last batch sent become
        visible, each batch's `last` the `after` of the next, until the connection
        closes.  One follow per connection (a second is InvalidParams).  A reader that
        falls behind is sent nothing until it has read what was sent, then larger
        batches, or `gap` when its events are no longer kept."""


class DaemonApi(CommonApi):
    """What both daemons' sockets answer beyond the common methods: `query_audit` and
    `backup`, which each daemon implements over its own state."""

    @rpc(InvalidParams, StorageError, reissue=True)
    def query_audit(
        self,
        since: float | None = None,
        until: float | None = None,
        actor: str | None = None,
        target: str | None = None,
        limit: Annotated[int, Meta(ge=0, le=MAX_LIMIT)] = DEFAULT_LIMIT,
    ) -> list[AuditEntry]:
        """This daemon's audit log (docs/contracts.md#audit-log): the entries with
        `since <= ts < until` whose actor and target are the ones given (null: any), the
        newest `limit`, newest last.  On wconfd, after `identify`."""

    @rpc(InvalidParams, StorageError)
    def backup(self, dir: BackupDir) -> BackupPart:
        """Write this daemon's part of a backup, consistent on its own (wconfd: the
        configuration with its serial and the reservations, at one serial; luxid: the
        job store at one transaction), to `<state dir>/backups/<dir>/`, replacing what
        was there; `lw backup` copies it from there.  `dir` is a relative path without
        `..` (InvalidParams naming `dir` otherwise, and nothing is written).  On wconfd,
        after `identify`, like its other methods."""
