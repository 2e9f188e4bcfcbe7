"""Methods both daemons serve (SPEC §3, §14): ping, version and get_metrics."""

from __future__ import annotations

from typing import Any

import msgspec

from client.api.declare import Api, rpc


class VersionInfo(msgspec.Struct, frozen=True):
    """What `version` answers."""

    version: str
    protocol: int


class CommonApi(Api):
    """The methods every Lockwarden socket answers, identified or not."""

    @rpc(identified=False, reissue=True)
    def ping(self) -> str:
        """Liveness check; answers "pong"."""

    @rpc(identified=False, reissue=True)
    def version(self) -> VersionInfo:
        """The daemon's software version and the protocol version (1)."""

    @rpc(identified=False, reissue=True)
    def get_metrics(self) -> dict[str, Any]:
        """The daemon's own counters, gauges and histograms (SPEC §14), keyed by Prometheus
        name: a value, or [[{label: value}, value], ...]; a histogram as its _bucket (with
        `le`), _sum and _count series."""
