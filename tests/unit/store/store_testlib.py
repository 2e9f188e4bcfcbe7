"""Helpers for the job store tests: submit jobs through the store seam as luxid does (ids
above the stored counter, one transaction), plus a few reads luxid itself never needs.

Also imported by the subprocess scripts of these tests (they put this directory on
PYTHONPATH).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from client import errors
from luxid.jobs import Job
from luxid.storage import SqliteJobStore
from luxid.storage.sqlite import SqliteTransaction

JobBuilder = Callable[[int], Job]


def tx_submit(tx: SqliteTransaction, builders: Sequence[JobBuilder]) -> list[Job]:
    """Inside a transaction: one new id per builder, above every stored one; insert."""
    first = tx._last_id + 1
    jobs = [build(first + i) for i, build in enumerate(builders)]
    for i, job in enumerate(jobs):
        if job.id != first + i:
            raise errors.InvalidParams(f"builder for job {first + i} returned job {job.id}")
    tx.insert(jobs)
    return jobs


def submit_many(store: SqliteJobStore, builders: Sequence[JobBuilder]) -> list[Job]:
    """Build and insert jobs with new ids, all in one transaction (one fsync)."""
    with store.transaction() as tx:
        return tx_submit(tx, builders)


def submit(store: SqliteJobStore, builder: JobBuilder) -> Job:
    """One new job in its own transaction."""
    return submit_many(store, [builder])[0]


def update_jobs(store: SqliteJobStore, jobs: Iterable[Job]) -> None:
    """The new state of existing jobs, in one transaction."""
    with store.transaction() as tx:
        tx.update(jobs)


def archive(store: SqliteJobStore, ids: Iterable[int]) -> list[int]:
    """Archive finalized live jobs, in one transaction; the ids archived."""
    with store.transaction() as tx:
        return tx.archive(ids)


def load_archived(store: SqliteJobStore, job_id: int) -> Job:
    """One archived job; NotFound if there is no such archived job."""
    job = store.load_job(job_id)
    if job is None or not job.archived:
        raise errors.NotFound(f"no archived job {job_id}")
    return job


def is_archived(store: SqliteJobStore, job_id: int) -> bool | None:
    """Whether a job is archived; None if unknown."""
    job = store.load_job(job_id)
    return None if job is None else job.archived


def counts(store: SqliteJobStore, archived: bool | None = False) -> dict[str, int]:
    """Number of jobs per status: live ones (default), archived ones, or all (None)."""
    if archived is None:
        rows = store._read("SELECT status, COUNT(*) FROM jobs GROUP BY status")
    else:
        rows = store._read(
            "SELECT status, COUNT(*) FROM jobs WHERE archived = ? GROUP BY status",
            (int(archived),),
        )
    return {status: n for status, n in rows}
