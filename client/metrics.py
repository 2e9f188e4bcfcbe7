"""Metrics a daemon keeps as it works, read with `get_metrics` (SPEC §14).

Pure data, no I/O and no clock of its own (callers pass the values they measured):

- `CATALOGUE` names every Lockwarden metric once: its Prometheus name, type, help text,
  label names, which daemon keeps it, and a histogram's fixed buckets.  The daemons build
  their registries from it and lw-rapi renders `/metrics` from it, so a name, a help text
  or a label set cannot differ between the two.
- `Registry` holds one daemon's values: counters, gauges and histograms, updated in O(1)
  (a histogram observation is one bisect) where the work happens, never by scanning.
  `snapshot()` is the `get_metrics` result: `{name: value | [[{label: value}, value]]}`,
  a histogram as its `_bucket` (cumulative, with `le`), `_sum` and `_count` series.
  A gauge whose count another structure already keeps incrementally (wconfd's lock table
  counts its held locks) is copied from it by a `before_snapshot` hook: a few O(1) reads
  per scrape, never a scan.
- Label sets are bounded: each metric keeps at most `max_series` label combinations;
  further ones are counted under the label value `"other"`, so no stream of distinct
  values (which job ids or client ids would be, and which no label may carry) can grow a
  daemon's memory or a scrape without bound.
- `instrument()` wraps a daemon's RPC dispatch table so that every call is counted in
  `lockwarden_rpc_requests_total{daemon,method,outcome}` and timed in
  `lockwarden_rpc_seconds{daemon,method}`.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

M = TypeVar("M", bound="_Series")
Kind = Literal["counter", "gauge", "histogram"]
LabelValues = tuple[str, ...]
OVERFLOW = "other"
WCONFD = "wconfd"
LUXID = "luxid"
RAPI = "rapi"

JOB_STATUSES = ("queued", "waiting", "running", "canceling", "canceled", "success", "error")
FINAL_STATUSES = ("canceled", "success", "error")
FILTER_ACTIONS = ("ACCEPT", "PAUSE", "REJECT", "CONTINUE", "RATE_LIMIT")
LOCK_LEVELS = ("cluster", "instance", "nodegroup", "node", "node-res", "network")
LOCK_MODES = ("shared", "exclusive")

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
        seeds=_each(*FINAL_STATUSES),
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
        seeds=tuple((lv, m) for lv in LOCK_LEVELS for m in LOCK_MODES),
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


class _Series:
    """The label combinations of one metric, bounded by `max_series`."""

    __slots__ = ("defn", "values")

    def __init__(self, defn: MetricDef) -> None:
        self.defn = defn
        self.values: dict[LabelValues, Any] = {}

    def _slot(self, labels: LabelValues) -> LabelValues:
        if labels in self.values:
            return labels
        if len(labels) != len(self.defn.labels):
            raise ValueError(f"{self.defn.name} takes labels {self.defn.labels}, got {labels}")
        if len(self.values) >= self.defn.max_series:
            return (OVERFLOW,) * len(labels)
        return labels


class _Scalar(_Series):
    """A counter's or a gauge's series: one number per label combination."""

    __slots__ = ()

    def __init__(self, defn: MetricDef) -> None:
        super().__init__(defn)
        self.values.update(dict.fromkeys(defn.seeds, 0) if defn.labels else {(): 0})

    def inc(self, *labels: str, by: float = 1) -> None:
        """Add `by` to the series of these label values."""
        key = self._slot(labels)
        self.values[key] = self.values.get(key, 0) + by


class Counter(_Scalar):
    """A value that only goes up."""

    __slots__ = ()

    def inc(self, *labels: str, by: float = 1) -> None:
        """Add `by` (≥ 0) to the series of these label values."""
        if not by >= 0:
            raise ValueError(f"{self.defn.name}: a counter cannot go down (by={by})")
        super().inc(*labels, by=by)


class Gauge(_Scalar):
    """A value that goes up and down (a count of things now); `inc` takes negative `by`."""

    __slots__ = ()

    def set(self, value: float, *labels: str) -> None:
        """Set the series of these label values."""
        self.values[self._slot(labels)] = value

    def remove(self, *labels: str) -> None:
        """Forget a series (e.g. a drain that ended), making room for another."""
        self.values.pop(labels, None)


class Histogram(_Series):
    """Observations counted in fixed buckets, with their sum and count.

    Each series is `[count per bucket (the last is +Inf), sum]`; counts are kept per
    bucket and made cumulative only in `snapshot()`.
    """

    __slots__ = ()

    def __init__(self, defn: MetricDef) -> None:
        super().__init__(defn)
        for seed in defn.seeds if defn.labels else ((),):
            self.values[seed] = self._empty()

    def _empty(self) -> list[Any]:
        return [[0] * (len(self.defn.buckets) + 1), 0.0]

    def observe(self, value: float, *labels: str) -> None:
        """Count one observation (a NaN is ignored: it has no bucket)."""
        if math.isnan(value):
            return
        key = self._slot(labels)
        series = self.values.get(key)
        if series is None:
            series = self.values[key] = self._empty()
        series[0][bisect_left(self.defn.buckets, value)] += 1
        series[1] += value


_CLASSES: dict[Kind, type[Counter | Gauge | Histogram]] = {
    "counter": Counter,
    "gauge": Gauge,
    "histogram": Histogram,
}


def _le(bound: float) -> str:
    return "+Inf" if bound == math.inf else repr(float(bound))


class Registry:
    """The metrics one daemon keeps: every catalogue entry whose daemon is this one (or
    "*"), at zero until updated."""

    def __init__(self, daemon: str) -> None:
        self.daemon = daemon
        self.metrics: dict[str, Counter | Gauge | Histogram] = {}
        self._hooks: list[Callable[[], None]] = []
        for defn in CATALOGUE:
            if defn.daemon in (daemon, "*"):
                self.metrics[defn.name] = _CLASSES[defn.kind](defn)

    def before_snapshot(self, hook: Callable[[], None]) -> None:
        """Run `hook` at each `snapshot()` first: it sets gauges from counts kept elsewhere
        (it must cost O(1), not a scan: it runs on every scrape)."""
        self._hooks.append(hook)

    def _typed(self, name: str, cls: type[M]) -> M:
        metric = self.metrics[name]
        if not isinstance(metric, cls):
            raise TypeError(f"{name} is a {metric.defn.kind}, not a {cls.__name__.lower()}")
        return metric

    def counter(self, name: str) -> Counter:
        """The counter `name` (KeyError if this daemon does not keep it)."""
        return self._typed(name, Counter)

    def gauge(self, name: str) -> Gauge:
        """The gauge `name`."""
        return self._typed(name, Gauge)

    def histogram(self, name: str) -> Histogram:
        """The histogram `name`."""
        return self._typed(name, Histogram)

    def snapshot(self) -> dict[str, Any]:
        """The `get_metrics` result: every metric's current series, plain JSON."""
        for hook in self._hooks:
            hook()
        out: dict[str, Any] = {}
        for name, metric in self.metrics.items():
            names = metric.defn.labels
            if isinstance(metric, Histogram):
                _histogram_series(out, name, metric)
            elif names:
                out[name] = [
                    [dict(zip(names, key, strict=True)), v] for key, v in metric.values.items()
                ]
            else:
                out[name] = metric.values[()]
        return out


def _histogram_series(out: dict[str, Any], name: str, metric: Histogram) -> None:
    names = metric.defn.labels
    bounds = [*map(_le, metric.defn.buckets), "+Inf"]
    buckets: list[Any] = []
    sums: list[Any] = []
    counts: list[Any] = []
    for key, (per_bucket, total) in metric.values.items():
        labels = dict(zip(names, key, strict=True))
        running = 0
        for bound, n in zip(bounds, per_bucket, strict=True):
            running += n
            buckets.append([{**labels, "le": bound}, running])
        sums.append([labels, total])
        counts.append([labels, running])
    out[f"{name}_bucket"] = buckets
    if names:
        out[f"{name}_sum"], out[f"{name}_count"] = sums, counts
    else:
        out[f"{name}_sum"], out[f"{name}_count"] = sums[0][1], counts[0][1]


Handler = Callable[..., Awaitable[Any]]


def _outcome(exc: BaseException) -> str:
    """`ok`'s opposite: the error's contract type (`data.type`), else its class name."""
    data = getattr(exc, "data", None)
    if isinstance(data, dict) and isinstance(data.get("type"), str):
        return data["type"]
    return type(exc).__name__


def instrument(handlers: Mapping[str, Handler], registry: Registry) -> dict[str, Handler]:
    """The dispatch table with every handler counted and timed under the registry's daemon.

    Handlers are those of `client.daemon.dispatch.build_methods` (`conn, *args, **kwargs`,
    raising an `RpcError`, whose `data.type` is the outcome, on failure); a call abandoned because its
    connection closed (a lock wait, say) counts with outcome `abandoned`.
    """
    requests = registry.counter("lockwarden_rpc_requests_total")
    seconds = registry.histogram("lockwarden_rpc_seconds")
    daemon = registry.daemon
    counts, timings, bounds = requests.values, seconds.values, seconds.defn.buckets
    clock = time.perf_counter

    def wrap(method: str, handle: Handler) -> Handler:
        ok, timing = (daemon, method, "ok"), (daemon, method)

        def record(outcome: str, elapsed: float) -> None:
            requests.inc(daemon, method, outcome)
            seconds.observe(elapsed, daemon, method)

        async def timed(conn: Any, *args: Any, **kwargs: Any) -> Any:
            start = clock()
            try:
                result = await handle(conn, *args, **kwargs)
            except Exception as exc:
                record(_outcome(exc), clock() - start)
                raise
            except BaseException:
                record("abandoned", clock() - start)
                raise
            elapsed = clock() - start
            series = timings.get(timing)
            if series is not None and ok in counts:  # the hot path: both series exist
                counts[ok] += 1
                series[0][bisect_left(bounds, elapsed)] += 1
                series[1] += elapsed
            else:
                record("ok", elapsed)
            return result

        return timed

    return {method: wrap(method, handle) for method, handle in handlers.items()}
