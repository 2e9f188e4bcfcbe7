"""What every job store does alike with a Job: pure helpers.

Both stores keep a job without its log entries (each entry is a row or a key of its own,
so appending one costs one small write) and put them back on load; both tell auto-archive
when a finalized job ended.
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec.structs import replace

from luxid.jobs.model import FINALIZED, Job, LogEntry, job_status


def age_ts(job: Job) -> float | None:
    """What auto-archive compares with: end (else start, else received) of a finalized job."""
    if job_status(job) not in FINALIZED:
        return None
    for ts in (job.end_ts, job.start_ts, job.received_ts):
        if ts is not None:
            return ts
    return None


def strip(job: Job) -> Job:
    """The job as stored: no log entries (stored one by one), no pending reason."""
    ops = tuple(replace(op, log=()) if op.log else op for op in job.ops)
    return replace(job, ops=ops, pending_reason=None)


def attach_logs(job: Job, entries: Iterable[tuple[int, LogEntry]]) -> Job:
    """The job with its log entries, given as (opcode index, entry) in serial order."""
    per_op: dict[int, list[LogEntry]] = {}
    for op_index, entry in entries:
        per_op.setdefault(op_index, []).append(entry)
    if not per_op:
        return job
    ops = list(job.ops)
    for index, found in per_op.items():
        if 0 <= index < len(ops):
            ops[index] = replace(ops[index], log=tuple(found))
    return replace(job, ops=tuple(ops))
