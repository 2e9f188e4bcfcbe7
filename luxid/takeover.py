"""What a new master's luxid does with the jobs of the master before it
(docs/contracts.md#replicated-control-plane): pure.

The old master's job processes are gone or fenced (its node died, hung or lost etcd; its
luxid stops them when it loses the role), so no job of it is running any more:

- a job that had a process and one of whose opcodes had started (the opcode-running gate
  exists in etcd, or the opcode shows it executed) ends `error` "master failover": its
  opcode may have done part of its work, and running it again could do it twice;
- a job that had a process but no opcode started yet (it was waiting for locks, or its
  process had just been given to it) is queued again, as if never started;
- a paused job whose process had stopped between opcodes stays queued, without a process;
- queued and finished jobs carry on unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable

from msgspec.structs import replace

from luxid.jobs import fail_job, is_finalized
from luxid.jobs.model import FINALIZED, QUEUED, Job, active_op_index

MASTER_FAILOVER = "master failover"


def take_over_job(job: Job, gates: frozenset[int], now: float) -> Job:
    """One job of the old master, as the new master carries it on (see the module doc).

    `gates` are the indexes of the job's opcodes whose running gate exists.
    """
    if is_finalized(job) or job.process_id is None:
        return job
    if job.paused and active_op_index(job) is None:
        return replace(job, process_id=None, process_start=None)
    if gates or any(op.exec_ts is not None for op in job.ops):
        return fail_job(job, now, MASTER_FAILOVER)
    ops = tuple(op if op.status in FINALIZED else replace(op, status=QUEUED) for op in job.ops)
    return replace(job, ops=ops, process_id=None, process_start=None, start_ts=None, paused=False)


def take_over(jobs: Iterable[Job], gates: Iterable[tuple[int, int]], now: float) -> list[Job]:
    """The jobs that change when this node takes over (every other job carries on)."""
    by_job: dict[int, set[int]] = {}
    for job_id, index in gates:
        by_job.setdefault(job_id, set()).add(index)
    changed = []
    for job in jobs:
        new = take_over_job(job, frozenset(by_job.get(job.id, ())), now)
        if new is not job:
            changed.append(new)
    return changed
