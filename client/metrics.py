"""The metric catalogue: every Lockwarden metric, named once (docs/contracts.md#observability).

Pure data.  The daemons keep their values in a `client._server.metrics.Registry` built
from it, read with `get_metrics`; lw-rapi renders `/metrics` from it.

- `CATALOGUE` names every Lockwarden metric once: its Prometheus name, type, help text,
  label names, which daemon keeps it, and a histogram's fixed buckets.  The daemons build
  their registries from it and lw-rapi renders `/metrics` from it, so a name, a help text
  or a label set cannot differ between the two.
- Label sets are bounded: each metric keeps at most `max_series` label combinations;
  further ones are counted under the label value `"other"` (OVERFLOW).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from client.vocabulary import FILTER_ACTIONS, FINALIZED_STATUSES, JOB_STATUSES, LEVELS, MODES

Kind = Literal["counter", "gauge", "histogram"]
LabelValues = tuple[str, ...]
OVERFLOW = "other"
WCONFD = "wconfd"
LUXID = "luxid"
RAPI = "rapi"

# Fixed histogram buckets (upper bounds, seconds).
FAST_SECONDS = (
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)
JOB_SECONDS = (
    0.01,
    0.05,
    0.1,
    0.5,
    1.0,
    5.0,
    10.0,
    30.0,
    60.0,
    300.0,
    900.0,
    1800.0,
    3600.0,
    10800.0,
    86400.0,
)


@dataclass(frozen=True)
class MetricDef:
    """One metric of the catalogue.

    `seeds` are label combinations present (at zero) from the start, so that a dashboard
    sees `lockwarden_jobs{status="running"} 0` rather than nothing.
    """

    name: str
    kind: Kind
    help: str
    daemon: str
    labels: tuple[str, ...] = ()
    buckets: tuple[float, ...] = ()
    seeds: tuple[LabelValues, ...] = ()
    max_series: int = 1000

    def __post_init__(self) -> None:
        if self.kind == "histogram":
            if not self.buckets or list(self.buckets) != sorted(set(self.buckets)):
                raise ValueError(f"{self.name}: buckets must be strictly increasing")
            if "le" in self.labels:
                raise ValueError(f"{self.name}: `le` is the bucket label")
        elif self.buckets:
            raise ValueError(f"{self.name}: only histograms have buckets")
        if self.kind == "counter" and not self.name.endswith("_total"):
            raise ValueError(f"{self.name}: a counter's name ends in _total")
        for seed in self.seeds:
            if len(seed) != len(self.labels):
                raise ValueError(f"{self.name}: seed {seed} does not match {self.labels}")


def _each(*values: str) -> tuple[LabelValues, ...]:
    return tuple((v,) for v in values)


CATALOGUE: tuple[MetricDef, ...] = (
    # -- luxid: the queue -------------------------------------------------------------
    MetricDef(
        "lockwarden_jobs",
        "gauge",
        "Jobs in the queue (not archived) by status.",
        LUXID,
        ("status",),
        seeds=_each(*JOB_STATUSES),
    ),
    MetricDef(
        "lockwarden_jobs_submitted_total",
        "counter",
        "Jobs submitted, including those rejected at submit.",
        LUXID,
    ),
    MetricDef(
        "lockwarden_jobs_finished_total",
        "counter",
        "Jobs that reached a final status (a job rejected at submit counts as canceled).",
        LUXID,
        ("status",),
        # In the order of JOB_STATUSES (canceled, success, error), as the series are listed.
        seeds=_each(*(s for s in JOB_STATUSES if s in FINALIZED_STATUSES)),
    ),
    MetricDef(
        "lockwarden_job_queue_seconds",
        "histogram",
        "Time from a job's receipt to the start of its first opcode, by that opcode.",
        LUXID,
        ("opcode",),
        JOB_SECONDS,
        max_series=200,
    ),
    MetricDef(
        "lockwarden_job_run_seconds",
        "histogram",
        "Time from a job's start to its end, by its first opcode.",
        LUXID,
        ("opcode",),
        JOB_SECONDS,
        max_series=200,
    ),
    MetricDef(
        "lockwarden_filter_verdicts_total",
        "counter",
        "Filter decisions taken on jobs, by the deciding rule's action.",
        LUXID,
        ("action",),
        seeds=_each(*FILTER_ACTIONS),
    ),
    MetricDef(
        "lockwarden_drains", "gauge", "Drains (node and queue) by status.", LUXID, ("status",)
    ),
    MetricDef(
        "lockwarden_drain_remaining",
        "gauge",
        "What a drain has left to move: instances of a node, jobs of the queue.",
        LUXID,
        ("target",),
    ),
    # -- wconfd: locks, clients, journal ----------------------------------------------
    MetricDef(
        "lockwarden_locks_held",
        "gauge",
        "Locks held, by level and mode.",
        WCONFD,
        ("level", "mode"),
        seeds=tuple((lv, m) for lv in LEVELS for m in MODES),
    ),
    MetricDef(
        "lockwarden_lock_wait_seconds",
        "histogram",
        "Time a lock request waited before it was granted, by the level of the first lock it "
        "wants exclusively (else of its first lock).",
        WCONFD,
        ("level",),
        FAST_SECONDS,
    ),
    MetricDef(
        "lockwarden_lock_requests_pending", "gauge", "Lock requests waiting to be granted.", WCONFD
    ),
    MetricDef(
        "lockwarden_deadlocks_total",
        "counter",
        "Lock requests refused because waiting would have closed a cycle.",
        WCONFD,
    ),
    MetricDef(
        "lockwarden_dead_clients_released_total",
        "counter",
        "Clients found dead whose locks, reservations and requests were released.",
        WCONFD,
    ),
    MetricDef(
        "lockwarden_journal_flush_seconds",
        "histogram",
        "Time to write and fsync one batch of wconfd's journal.",
        WCONFD,
        (),
        FAST_SECONDS,
    ),
    MetricDef(
        "lockwarden_master",
        "gauge",
        "1 on the node whose wconfd is the master of the control plane.",
        WCONFD,
        ("node",),
        max_series=50,
    ),
    # -- both daemons: the RPC layer --------------------------------------------------
    MetricDef(
        "lockwarden_rpc_requests_total",
        "counter",
        "RPC requests answered, by daemon, method and outcome (ok or the error type).",
        "*",
        ("daemon", "method", "outcome"),
    ),
    MetricDef(
        "lockwarden_rpc_seconds",
        "histogram",
        "Time to answer an RPC request (a lock wait included), by daemon and method.",
        "*",
        ("daemon", "method"),
        FAST_SECONDS,
    ),
    # -- lw-rapi itself ---------------------------------------------------------------
    MetricDef(
        "lockwarden_up",
        "gauge",
        "1 if lw-rapi read the daemon's metrics at this scrape, 0 if it could not.",
        RAPI,
        ("daemon",),
    ),
)
BY_NAME: dict[str, MetricDef] = {m.name: m for m in CATALOGUE}
