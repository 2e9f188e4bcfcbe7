"""What clients and daemons must agree on, defined once.

Lock levels and their order, lock modes, the Big Ganeti Lock, the lockset name, how a lock
name is parsed, formatted and ordered, the priority range, the job and opcode statuses, the
filter actions, the bounds of the integers every part can hold, and the common opcode
params.
The API declarations (`client.api`), the stubs' callers, the `lw` commands and the
daemons all take these from here, so a level or a range cannot differ between the side
that sends and the side that checks.

Pure and light (the standard library only), so `lw --help` pays nothing for it.  The
msgspec forms of these for the declarations are in `client.api.numbers` (ranges) and
`client.api.opcodes` (the common opcode params).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

# -- locks (docs/contracts.md#lock-names-and-order) --------------------------------------

LEVELS: Final[tuple[str, ...]] = ("cluster", "instance", "nodegroup", "node", "node-res", "network")
"""The lock levels, in lock order."""

LEVEL_INDEX: Final[dict[str, int]] = {name: i for i, name in enumerate(LEVELS)}
"""Level name -> its position in the lock order."""

LOCKSET: Final = "[lockset]"
"""The reserved member name meaning "all members of the level, present and future"."""

BGL: Final = "cluster/BGL"
"""The Big Ganeti Lock: the one member of the cluster level."""

Mode = Literal["shared", "exclusive"]
RequestMode = Literal["shared", "exclusive", "release"]

SHARED: Final[Mode] = "shared"
EXCLUSIVE: Final[Mode] = "exclusive"
RELEASE: Final = "release"
MODES: Final[tuple[Mode, ...]] = get_args(Mode)
"""The modes a lock is held in: shared, exclusive."""
REQUEST_MODES: Final[tuple[RequestMode, ...]] = get_args(RequestMode)
"""The modes of a [lock, mode] pair in a request."""

ORDER_HINT: Final = (
    "cluster < instance < nodegroup < node < node-res < network, "
    "a level's [lockset] before its members, members by name"
)
"""How to acquire in order, for messages that explain a LockOrderError."""

LockKey = tuple[int, int, str]
"""The sort key of a lock: (level index, 0 for the lockset / 1 for a member, name)."""


def lock_name(level: str, member: str) -> str:
    """The lock "<level>/<member>"; ValueError saying what is wrong with either part."""
    if level not in LEVEL_INDEX:
        raise ValueError(f"unknown lock level {level!r} (levels: {', '.join(LEVELS)})")
    if not member or "/" in member:
        raise ValueError(f"bad lock member {member!r}: must be non-empty and without '/'")
    if level == LEVELS[0] and member not in ("BGL", LOCKSET):
        raise ValueError(f"unknown lock {level}/{member}: the cluster level has only {BGL}")
    return f"{level}/{member}"


def lockset_name(level: str) -> str:
    """The lockset of a level ("node" -> "node/[lockset]"): all its members, present and future."""
    return lock_name(level, LOCKSET)


def split_lock_name(name: str) -> tuple[str, str]:
    """(level, member) of a lock name; ValueError saying what is malformed."""
    level, sep, member = name.partition("/")
    if not sep:
        raise ValueError(f"malformed lock name {name!r}: expected '<level>/<name>'")
    lock_name(level, member)
    return level, member


def lock_key(name: str) -> LockKey:
    """The total-order key of a lock name; ValueError if it is malformed."""
    level, member = split_lock_name(name)
    return (LEVEL_INDEX[level], 0 if member == LOCKSET else 1, member)


# -- priorities (docs/contracts.md#lock-rules, rule 4; docs/contracts.md#job-model) ------

PRIORITY_MIN: Final = -20
"""The most urgent priority."""
PRIORITY_MAX: Final = 19
"""The least urgent priority."""
DEFAULT_PRIORITY: Final = 0

PRIORITY_HINT: Final = f"{PRIORITY_MIN} (most urgent) .. {PRIORITY_MAX}"

# -- integers ----------------------------------------------------------------------------

INT64_MIN: Final = -(2**63)
INT64_MAX: Final = 2**63 - 1
"""The bounds of a signed 64-bit integer: every integer a client sends, a daemon stores or
the job store keeps must lie in INT64_MIN..INT64_MAX (the journal, the snapshot and SQLite
hold no larger one)."""

# -- jobs and opcodes (docs/contracts.md#job-model) --------------------------------------

JobStatus = Literal["queued", "waiting", "running", "canceling", "canceled", "success", "error"]
JOB_STATUSES: Final[tuple[JobStatus, ...]] = get_args(JobStatus)
"""Every status of a job or an opcode, from submission to its end.  This order is the order
of the status counts luxid reports and of the series of the job metrics."""

QUEUED: Final = "queued"
WAITING: Final = "waiting"
RUNNING: Final = "running"
CANCELING: Final = "canceling"
CANCELED: Final = "canceled"
SUCCESS: Final = "success"
ERROR: Final = "error"

FinalizedStatus = Literal["success", "error", "canceled"]
FINALIZED_STATUSES: Final[tuple[FinalizedStatus, ...]] = get_args(FinalizedStatus)
"""The statuses a job or opcode ends in (and that a dependency can wait for)."""

ACTIVE_STATUSES: Final[tuple[JobStatus, ...]] = (WAITING, RUNNING, CANCELING)
"""The statuses of a job (or an opcode) that a job process is working on right now."""

COMMON_OPCODE_PARAMS: Final[tuple[str, ...]] = (
    "priority", "depends", "reason", "comment", "ignore_budgets"
)  # fmt: skip
"""Params every opcode accepts besides its own: priority, depends, reason, comment, and
ignore_budgets (start even past a disruption budget, docs/contracts.md#disruption-budgets)."""

# -- filter rules ------------------------------------------------------------------------

FilterAction = Literal["ACCEPT", "PAUSE", "REJECT", "CONTINUE", "RATE_LIMIT"]
FILTER_ACTIONS: Final[tuple[FilterAction, ...]] = get_args(FilterAction)
"""The five actions of a filter rule."""
RATE_LIMIT: Final = "RATE_LIMIT"
"""The one action that takes an argument: on the wire it is `["RATE_LIMIT", n]`."""
WORD_FILTER_ACTIONS: Final[tuple[FilterAction, ...]] = tuple(
    action for action in FILTER_ACTIONS if action != RATE_LIMIT
)
"""The actions sent as a bare word: ACCEPT, PAUSE, REJECT, CONTINUE."""
