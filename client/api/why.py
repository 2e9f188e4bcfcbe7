"""What why_job answers (docs/contracts.md#why-a-job-waits): the chain of Steps from a job
to what holds it, one per link, each Step's `kind` naming its shape."""

from __future__ import annotations

from typing import Literal

import msgspec

from client.api.wconfd import LockHolder


class FilterStep(msgspec.Struct, frozen=True, tag="filter", tag_field="kind"):
    """A filter rule holds the job: its uuid and action (PAUSE; REJECT until the job is
    canceled)."""

    text: str
    uuid: str
    action: str


class RateLimitStep(msgspec.Struct, frozen=True, tag="rate_limit", tag_field="kind"):
    """A full rate limit: `bucket` is "filter/<uuid>" for a RATE_LIMIT rule, "<n>:<label>"
    for a reason-trail bucket; `running` the running jobs it counts."""

    text: str
    bucket: str
    limit: int
    running: list[int]


class BudgetStep(msgspec.Struct, frozen=True, tag="budget", tag_field="kind"):
    """A disruption budget holds the job: its disrupted members, [instance, why]."""

    text: str
    name: str
    disrupted: list[list[str]]


class SlotsStep(msgspec.Struct, frozen=True, tag="slots", tag_field="kind"):
    """Every slot is taken: `running` jobs of `max_running_jobs`."""

    text: str
    running: int
    max_running_jobs: int


class DependencyStep(msgspec.Struct, frozen=True, tag="dependency", tag_field="kind"):
    """The job waits for another job to finish; the chain goes on with that job's own."""

    text: str
    job_id: int
    status: str


class LockStep(msgspec.Struct, frozen=True, tag="lock", tag_field="kind"):
    """The job waits for a lock, in `mode` (what it asked for), held by `held_by` (what
    each holds, since when); the chain goes on with a holder's own."""

    text: str
    lock: str
    mode: str
    held_by: list[LockHolder]


class DrainFlagStep(msgspec.Struct, frozen=True, tag="drain_flag", tag_field="kind"):
    """The queue drain's rule holds the job (instead of a FilterStep)."""

    text: str
    target: Literal["queue"]
    mode: Literal["soft", "hard"]


class CycleStep(msgspec.Struct, frozen=True, tag="cycle", tag_field="kind"):
    """The chain came back to a job already in it: a wait-for cycle of these jobs."""

    text: str
    job_ids: list[int]


Step = (
    FilterStep
    | RateLimitStep
    | BudgetStep
    | SlotsStep
    | DependencyStep
    | LockStep
    | DrainFlagStep
    | CycleStep
)


class WhyJob(msgspec.Struct, frozen=True):
    """What why_job answers: the job's status and the chain from it to what holds it
    (empty for a job that runs unhindered or is finalized; at most 8 Steps)."""

    job_id: int
    status: str
    chain: list[Step]
