"""luxid's job metrics (docs/observability.md#where-each-metric-is-updated), kept as jobs
change — never by scanning the queue.

Every change of a live job passes through `LiveJobs` (luxid.live_jobs), which tells
`JobMetrics` the job's version before and after; from that pair alone this module keeps

- `lockwarden_jobs{status}`: -1 for the old version's status, +1 for the new one's (an
  archived job leaves with `dropped`; the jobs loaded at start are counted once);
- `lockwarden_jobs_finished_total{status}`: when a job becomes finalized;
- `lockwarden_job_queue_seconds{opcode}`: when a job is first given a process
  (received → started), by its first opcode's OP_ID;
- `lockwarden_job_run_seconds{opcode}`: when a started job becomes finalized (started →
  ended).  A job canceled or rejected before it started has no run time.

`lockwarden_jobs_submitted_total` is counted by `LiveJobs.add` (jobs rejected at submit
included: they are stored, as canceled, and so count as finished too).  Opcode labels
are OP_IDs of the opcode registry (every submitted opcode was checked against it), and
the registry bounds the series besides (the catalogue's `max_series`).
"""

from __future__ import annotations

from client._server.metrics import Registry
from luxid.jobs import Job, job_status
from luxid.jobs.model import FINALIZED


def first_opcode(job: Job) -> str:
    """The label a job's timings are filed under: its first opcode's OP_ID."""
    return str(job.ops[0].input.get("OP_ID", "")) if job.ops else ""


class JobMetrics:
    """The job metrics of one luxid registry (event loop only)."""

    __slots__ = ("_finished", "_jobs", "_queue_s", "_run_s", "_submitted")

    def __init__(self, registry: Registry) -> None:
        self._jobs = registry.gauge("lockwarden_jobs")
        self._submitted = registry.counter("lockwarden_jobs_submitted_total")
        self._finished = registry.counter("lockwarden_jobs_finished_total")
        self._queue_s = registry.histogram("lockwarden_job_queue_seconds")
        self._run_s = registry.histogram("lockwarden_job_run_seconds")

    def submitted(self, count: int) -> None:
        """`count` new jobs were stored."""
        self._submitted.inc(by=count)

    def changed(self, old: Job | None, new: Job) -> None:
        """A live job went from `old` (None: it is new) to `new`."""
        if (
            old is not None
            and old.ops is new.ops
            and old.start_ts == new.start_ts
            and old.process_id == new.process_id
            and old.paused == new.paused
        ):
            return  # nothing the status derives from changed (a pending reason)
        status = job_status(new)
        if old is None:
            was: str | None = None
        else:
            was = job_status(old)
            if was == status and old.start_ts == new.start_ts:
                return  # the common case: a pending reason, a log entry, a priority
            if was != status:
                self._jobs.inc(was, by=-1)
        if was != status:
            self._jobs.inc(status)
        if new.start_ts is not None and (old is None or old.start_ts is None):
            self._queue_s.observe(new.start_ts - new.received_ts, first_opcode(new))
        if status in FINALIZED and was not in FINALIZED:
            self._finished.inc(status)
            if new.start_ts is not None and new.end_ts is not None:
                self._run_s.observe(new.end_ts - new.start_ts, first_opcode(new))

    def recount(self, old: Job | None, new: Job | None) -> None:
        """Only the gauge follows a job replaced or dropped without a transition: read back
        from the store after a failed write (what was counted as it happened in memory
        stays counted), or archived (`new` None)."""
        if old is not None:
            self._jobs.inc(job_status(old), by=-1)
        if new is not None:
            self._jobs.inc(job_status(new))
