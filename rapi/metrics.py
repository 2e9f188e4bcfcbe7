"""`GET /metrics` (SPEC §14): both daemons' `get_metrics`, gathered at scrape time and
rendered by prometheus_client's own text exposition.

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
from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
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


def _series_names(defn: MetricDef) -> tuple[str, ...]:
    if defn.kind == "histogram":
        return (f"{defn.name}_bucket", f"{defn.name}_sum", f"{defn.name}_count")
    return (defn.name,)


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
                for series in _series_names(defn):
                    _add(family, series, snap.get(series) if snap else None)
            yield family


def _add(family: Metric, series: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, list):
        for labels, number in value:
            family.add_sample(series, {k: str(v) for k, v in labels.items()}, float(number))
    else:
        family.add_sample(series, {}, float(value))


async def _snapshot(
    daemon: str, client: AsyncLuxiClient | AsyncWConfdClient
) -> dict[str, Any] | None:
    try:
        return await asyncio.wait_for(client.get_metrics(), SCRAPE_TIMEOUT)
    except (errors.RpcError, TimeoutError, OSError) as exc:
        log.warning("/metrics: cannot read %s's metrics: %s", daemon, exc)
        return None


async def scrape(luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient) -> bytes:
    """One scrape: both daemons asked at once, rendered in the Prometheus text format."""
    wc, lx = await asyncio.gather(_snapshot(WCONFD, wconfd), _snapshot(LUXID, luxi))
    return generate_latest(DaemonCollector({WCONFD: wc, LUXID: lx}))


async def get_metrics(luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient) -> web.Response:
    """The `/metrics` answer."""
    body = await scrape(luxi, wconfd)
    return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})
