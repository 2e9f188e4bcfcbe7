"""The metrics one daemon keeps as it works, read with `get_metrics`.

No I/O and no clock of its own (callers pass the values they measured).

- `Registry` holds one daemon's values of the catalogue's metrics (`client.metrics`):
  counters, gauges and histograms, updated in O(1) (a histogram observation is one bisect)
  where the work happens, never by scanning.  `snapshot()` is the `get_metrics` result:
  `{name: value | [[{label: value}, value]]}`, a histogram as its `_bucket` (cumulative,
  with `le`), `_sum` and `_count` series.  A gauge whose count another structure already
  keeps incrementally (wconfd's lock table counts its held locks) is copied from it by a
  `before_snapshot` hook: a few O(1) reads per scrape, never a scan.
- Label sets are bounded by the catalogue's `max_series`; further combinations are counted
  under the label value `"other"`, so no stream of distinct values can grow a daemon's
  memory or a scrape without bound.
- `instrument()` wraps a daemon's RPC dispatch table so that every call is counted in
  `lockwarden_rpc_requests_total{daemon,method,outcome}` and timed in
  `lockwarden_rpc_seconds{daemon,method}`.
"""

from __future__ import annotations

import math
import time
from bisect import bisect_left
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

from client._server.roles import Superseded
from client.metrics import CATALOGUE, OVERFLOW, Kind, LabelValues, MetricDef

M = TypeVar("M", bound="_Series")


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

    Handlers are those of `client._server.dispatch.build_methods` (`conn, *args, **kwargs`,
    raising an `RpcError`, whose `data.type` is the outcome, on failure); a call abandoned
    because its connection closed (a lock wait, say) counts with outcome `abandoned`; a call
    handed over after a takeover (`Superseded`) is counted once, by the handler that answers.
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
            except Superseded:  # handed to the current table's handler, which counts it
                raise
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
