"""Job dependencies and reason-trail rate-limit buckets (pure).

Dependency semantics are Ganeti's job-process check (jqueue's
_JobDependencyManager), applied by luxid before it starts a job instead of by the job process:

- the dependency is not finalized → wait ("waiting for job <id>");
- it ended `canceled` and `canceled` is not among the wanted statuses → the job is canceled;
- no wanted statuses (any final status) or its status is wanted → go on;
- it ended in another status → the job fails (Ganeti: WRONGSTATUS, the opcode errors);
- the id is unknown (never existed) → the job fails (Ganeti: JobLost → ERROR). Archived
  jobs are not unknown: their stored status counts, as Ganeti reads the archive too.
- depending on itself fails (Ganeti); depending on a later job id fails too (beyond Ganeti:
  it is the only way to build a dependency cycle, which would otherwise wait forever).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, Literal

import msgspec

from luxid.filters.ratelimit import bucket_of
from luxid.jobs.model import CANCELED, FINALIZED, Job

DepAction = Literal["continue", "wait", "cancel", "fail"]
StatusOf = Callable[[int], str | None]


class DepCheck(msgspec.Struct, frozen=True):
    """What the dependencies say about starting a job; `job_id` is the deciding dependency."""

    action: DepAction
    job_id: int | None = None
    message: str = ""


DEPS_OK: Final = DepCheck("continue")


def check_dependencies(job: Job, status_of: StatusOf) -> DepCheck:
    """Check `job`'s dependencies in order; the first one that does not say go on decides.

    `status_of(id)` returns a job's status (archived jobs included) or None if unknown.
    """
    for dep in job.depends:
        dep_id = dep.job_id
        if dep_id == job.id:
            return DepCheck("fail", dep_id, "Job can't depend on itself")
        if dep_id > job.id:
            return DepCheck("fail", dep_id, f"Job {job.id} can't depend on later job {dep_id}")
        status = status_of(dep_id) if dep_id > 0 else None
        if status is None:
            return DepCheck("fail", dep_id, f"Dependency error: job {dep_id} not found")
        if status not in FINALIZED:
            return DepCheck("wait", dep_id, f"waiting for job {dep_id}")
        wanted = dep.statuses
        if status == CANCELED and CANCELED not in wanted:
            return DepCheck("cancel", dep_id, f"Dependency job {dep_id} was cancelled")
        if wanted and status not in wanted:
            return DepCheck(
                "fail",
                dep_id,
                f"Dependency job {dep_id} finished with status '{status}',"
                f" not one of '{', '.join(wanted)}' as required",
            )
    return DEPS_OK


# --------------------------------------------------------------- reason rate limits


def reason_buckets(job: Job) -> frozenset[str]:
    """The rate-limit buckets of a job: from any reason text of any of its opcodes."""
    keys: set[str] = set()
    for op in job.ops:
        for entry in op.input.get("reason") or ():
            if len(entry) >= 2 and isinstance(entry[1], str):
                key = bucket_of(entry[1])
                if key is not None:
                    keys.add(key)
    return frozenset(keys)
