"""`GET /metrics`: both daemons' `get_metrics`, gathered at scrape time and rendered by
prometheus_client's own text exposition.

Nothing is cached or polled between scrapes: each scrape asks wconfd and luxid at once
(concurrently, each bounded by `SCRAPE_TIMEOUT`), and a `DaemonCollector` turns their
snapshots into metric families, with the help text and type of `client.metrics.CATALOGUE`.
Every catalogue name is present, with whatever series the daemons reported;
`lockwarden_up{daemon}` says which daemon could not be read (its series are then absent,
not zero: a zero would be a lie).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from typing import Any

from aiohttp import web
from prometheus_client.exposition import choose_encoder
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from client import AsyncLuxiClient, AsyncWConfdClient, errors
from client.metrics import CATALOGUE, LUXID, WCONFD, MetricDef

log = logging.getLogger(__name__)

SCRAPE_TIMEOUT = 5.0


def _family(defn: MetricDef) -> Metric:
    # prometheus_client names a counter family without its _total; the samples keep it.
    name = defn.name.removesuffix("_total") if defn.kind == "counter" else defn.name
    return Metric(name, defn.help, defn.kind)


class DaemonCollector(Collector):
    """The metric families of one scrape, from each daemon's `get_metrics` snapshot.

    `snapshots` maps a daemon's name to its snapshot, or to None when it could not be
    read.  A series is `value` (no labels) or `[[{label: value}, value], ...]`.
    """

    def __init__(self, snapshots: Mapping[str, dict[str, Any] | None]) -> None:
        self.snapshots = snapshots

    def collect(self) -> Iterator[Metric]:
        for defn in CATALOGUE:
            family = _family(defn)
            if defn.name == "lockwarden_up":
                for daemon, snap in self.snapshots.items():
                    family.add_sample(defn.name, {"daemon": daemon}, 0.0 if snap is None else 1.0)
            for snap in self.snapshots.values():
                if not snap:
                    continue
                if defn.kind == "histogram":
                    _add_histogram(family, defn.name, snap)
                else:
                    _add(family, defn.name, snap.get(defn.name))
            yield family


def _labels(labels: dict[str, Any]) -> dict[str, str]:
    return {k: str(v) for k, v in labels.items()}


def _add(family: Metric, series: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, list):
        for labels, number in value:
            family.add_sample(series, _labels(labels), float(number))
    else:
        family.add_sample(series, {}, float(value))


def _add_histogram(family: Metric, name: str, snap: dict[str, Any]) -> None:
    """A histogram's samples series by series (its buckets, count, sum together), as
    OpenMetrics requires; the snapshot lists all buckets, then sums, then counts."""
    counts, sums = snap.get(f"{name}_count"), snap.get(f"{name}_sum")
    if counts is None or sums is None:
        return
    if not isinstance(counts, list):  # no labels: one series
        counts, sums = [[{}, counts]], [[{}, sums]]
    buckets: dict[tuple[tuple[str, str], ...], list[tuple[dict[str, str], float]]] = {}
    for labels, number in snap.get(f"{name}_bucket", []):
        bucket = _labels(labels)
        key = tuple(sorted((k, v) for k, v in bucket.items() if k != "le"))
        buckets.setdefault(key, []).append((bucket, float(number)))
    for (labels, count), (_, total) in zip(counts, sums, strict=True):
        series = _labels(labels)
        for bucket, number in buckets.get(tuple(sorted(series.items())), []):
            family.add_sample(f"{name}_bucket", bucket, number)
        family.add_sample(f"{name}_count", series, float(count))
        family.add_sample(f"{name}_sum", series, float(total))


async def _snapshot(
    daemon: str, client: AsyncLuxiClient | AsyncWConfdClient
) -> dict[str, Any] | None:
    try:
        return await asyncio.wait_for(client.get_metrics(), SCRAPE_TIMEOUT)
    except (errors.RpcError, TimeoutError, OSError) as exc:
        log.warning("/metrics: cannot read %s's metrics: %s", daemon, exc)
        return None


async def scrape(
    luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient, accept: str | None
) -> tuple[bytes, str]:
    """One scrape: both daemons asked at once, rendered in the format the `Accept` header
    asks for as prometheus_client negotiates it (the classic text format 0.0.4 unless
    OpenMetrics or text 1.0.0 is asked for); the body and its content type."""
    wc, lx = await asyncio.gather(_snapshot(WCONFD, wconfd), _snapshot(LUXID, luxi))
    encoder, content_type = choose_encoder(accept or "")
    return encoder(DaemonCollector({WCONFD: wc, LUXID: lx})), content_type


async def get_metrics(
    luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient, accept: str | None
) -> web.Response:
    """The `/metrics` answer."""
    body, content_type = await scrape(luxi, wconfd, accept)
    return web.Response(body=body, headers={"Content-Type": content_type})
