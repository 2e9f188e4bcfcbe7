"""The job model of luxid (docs/contracts.md#job-model): msgspec Structs, status and
priority computation.

Pure code: no files, sockets, clocks or processes — callers pass `now` (float seconds since
the epoch). Structs are frozen so that a job value never changes under a reader (the daemon
can hand the same Job to a query while a transition builds the next one); transitions in
`luxid.jobs.transitions` return new Jobs.
"""

from __future__ import annotations

from typing import Any, Final

import msgspec

from client import errors
from client.api.opcodes import check_opcodes
from client.vocabulary import (
    ACTIVE_STATUSES,
    CANCELED,
    CANCELING,
    DEFAULT_PRIORITY,
    ERROR,
    FINALIZED_STATUSES,
    JOB_STATUSES,
    QUEUED,
    RUNNING,
    SUCCESS,
    WAITING,
    JobStatus,
)

OpStatus = JobStatus

ALL_STATUSES: Final[tuple[JobStatus, ...]] = JOB_STATUSES
FINALIZED: Final[frozenset[str]] = frozenset(FINALIZED_STATUSES)
# Ops in these states have a job process working on them right now.
ACTIVE_OP: Final[frozenset[str]] = frozenset(ACTIVE_STATUSES)
# job_status: an opcode in one of these decides the job's status; one in these is current.
_DECIDING: Final[frozenset[str]] = frozenset((ERROR, CANCELING, CANCELED))
_CURRENT: Final[frozenset[str]] = frozenset((WAITING, RUNNING))


# Results written by luxid itself into opcodes it finalizes.
MSG_CANCELED: Final = "Job canceled by request"
MSG_PRECEDING_FAILED: Final = "Preceding opcode failed"
MSG_PROCESS_DIED: Final = "job process died"


class LogEntry(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """One log entry `[serial, timestamp, type, message]`; serial is per job, increasing."""

    serial: int
    timestamp: float
    type: str
    message: Any

    def to_list(self) -> list[Any]:
        """The wire form `[serial, timestamp, type, message]`."""
        return [self.serial, self.timestamp, self.type, self.message]


class Dependency(msgspec.Struct, frozen=True, array_like=True, gc=False):
    """`[job_id, [status…]]` with an absolute job id (resolved at submit)."""

    job_id: int
    statuses: tuple[str, ...] = ()

    def to_list(self) -> list[Any]:
        """The wire form `[job_id, [status…]]`."""
        return [self.job_id, list(self.statuses)]


class OpCode(msgspec.Struct, frozen=True, gc=False):
    """One opcode of a job: its submitted input and its execution state.

    `input` is the flat opcode dict (OP_ID, own params and the common params priority,
    depends — absolute after submit —, reason, comment). `priority` is the current one
    (changed by change_job_priority); the input keeps the submitted value, as Ganeti does.
    """

    input: dict[str, Any]
    status: OpStatus = QUEUED
    result: Any = None
    log: tuple[LogEntry, ...] = ()
    priority: int = DEFAULT_PRIORITY
    start_ts: float | None = None
    exec_ts: float | None = None
    end_ts: float | None = None

    @property
    def op_id(self) -> str:
        """The opcode's OP_ID."""
        return str(self.input.get("OP_ID", ""))


class Job(msgspec.Struct, frozen=True, gc=False):
    """A job: a list of opcodes plus queue bookkeeping.

    - `start_ts` is set when luxid first gives the job a process; `end_ts` when finalized.
    - `process_id`/`process_start` identify the job process (psutil create_time), so a
      restarted luxid can reattach to it or declare it dead.
    - `paused` is set when a PAUSE rule applies to a started job: it finishes its current
      opcode and is `queued` again until started anew (docs/contracts.md#filters).
    - `log_serial` is the last log serial handed out (serials are global per job).
    - `pending_reason` is why a queued job does not run yet (set by the scheduler pass).
    """

    id: int
    ops: tuple[OpCode, ...]
    received_ts: float
    depends: tuple[Dependency, ...] = ()
    start_ts: float | None = None
    end_ts: float | None = None
    archived: bool = False
    process_id: int | None = None
    process_start: float | None = None
    paused: bool = False
    log_serial: int = 0
    pending_reason: str | None = None


# ---------------------------------------------------------------------------- status


def job_started(job: Job) -> bool:
    """True once luxid gave the job a process or any opcode left `queued`."""
    if job.start_ts is not None or job.process_id is not None:
        return True
    return any(op.status != QUEUED for op in job.ops)


def job_status(job: Job) -> JobStatus:
    """The job status from its opcodes, as Ganeti's calcJobStatus, with the fix of
    docs/contracts.md#job-model.

    Scan in order: error/canceling/canceled decide at once; waiting/running become the
    current value; success/queued are skipped. All success (or no ops) → success.
    Otherwise the current value — except that a started job with no active opcode
    (between two opcodes) is `running`, unless a PAUSE rule sent it back to `queued`.
    Every scheduling pass asks it of every queued job, so `queued` opcodes are the
    first case tested.
    """
    current: JobStatus = QUEUED
    all_success = True
    moved = False  # an opcode left `queued` (job_started, without a second scan)
    for op in job.ops:
        status = op.status
        if status == QUEUED:
            all_success = False
            continue
        if status in _DECIDING:
            return status
        moved = True
        if status != SUCCESS:
            all_success = False
            if status in _CURRENT:
                current = status
    if all_success:
        return SUCCESS
    started = moved or job.start_ts is not None or job.process_id is not None
    if current == QUEUED and not job.paused and started:
        return RUNNING
    return current


def is_finalized(job: Job) -> bool:
    """True when the job is success, error or canceled (it will never change again)."""
    return job_status(job) in FINALIZED


def job_priority(job: Job) -> int:
    """The minimum priority of the unfinished opcodes; 0 when there are none."""
    prio: int | None = None
    for op in job.ops:
        if op.status not in FINALIZED and (prio is None or op.priority < prio):
            prio = op.priority
    return DEFAULT_PRIORITY if prio is None else prio


def active_op_index(job: Job) -> int | None:
    """Index of the opcode a job process is working on (waiting/running/canceling), if any."""
    for i, op in enumerate(job.ops):
        if op.status in ACTIVE_OP:
            return i
    return None


def next_op_index(job: Job) -> int | None:
    """Index of the first unfinished opcode (the one a job process works on next)."""
    for i, op in enumerate(job.ops):
        if op.status not in FINALIZED:
            return i
    return None


def log_entries_since(job: Job, serial: int | None) -> list[list[Any]]:
    """Every log entry with a serial greater than `serial` (all if None), in serial order."""
    after = -1 if serial is None else serial
    out = [entry for op in job.ops for entry in op.log if entry.serial > after]
    out.sort(key=lambda e: e.serial)
    return [e.to_list() for e in out]


# ------------------------------------------------------------------------- submit


def validate_ops(ops: Any) -> None:
    """Check a submitted job: a non-empty list of opcodes with valid common params."""
    if not isinstance(ops, list) or not ops:
        raise errors.InvalidParams("ops: a job needs a non-empty list of opcodes")
    check_opcodes(ops)


def resolve_dependency(job_id: int, dep_id: int) -> int:
    """Absolute id of a dependency: negative ids are relative to the job's own id."""
    return job_id + dep_id if dep_id < 0 else dep_id


def new_job(job_id: int, ops: list[dict[str, Any]], now: float) -> Job:
    """Build a freshly submitted job (all opcodes queued), normalized as
    docs/contracts.md#job-model says.

    Each opcode's reason trail gets `["lw:opcode:<op_id lower>", "job=<id>;index=<i>",
    now_ns]`; relative dependencies become absolute. Call `validate_ops` first: this
    function trusts its input's shape. The caller's dicts are not modified.
    """
    now_ns = int(now * 1_000_000_000)
    built: list[OpCode] = []
    deps: list[Dependency] = []
    for index, raw in enumerate(ops):
        op_input = dict(raw)
        op_id = str(op_input["OP_ID"])
        reason = [list(r) for r in op_input.get("reason") or []]
        reason.append([f"lw:opcode:{op_id.lower()}", f"job={job_id};index={index}", now_ns])
        op_input["reason"] = reason
        if op_input.get("depends") is not None:
            resolved = []
            for dep_id, statuses in op_input["depends"]:
                absolute = resolve_dependency(job_id, dep_id)
                resolved.append([absolute, list(statuses)])
                deps.append(Dependency(absolute, tuple(statuses)))
            op_input["depends"] = resolved
        built.append(
            OpCode(input=op_input, priority=int(op_input.get("priority", DEFAULT_PRIORITY)))
        )
    return Job(id=job_id, ops=tuple(built), received_ts=now, depends=tuple(deps))
