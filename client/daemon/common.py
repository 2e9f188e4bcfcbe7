"""The methods every daemon answers alike (client.api.common.CommonApi): ping, version and
get_metrics."""

from __future__ import annotations

from typing import Any

from client import __version__
from client.api.common import VersionInfo
from client.metrics import Registry
from client.protocol import PROTOCOL_VERSION


class CommonMethods:
    """ping, version and get_metrics over the daemon's own registry
    (`client.metrics.Registry(daemon)`, which the daemon updates as it works)."""

    def __init__(self, metrics: Registry) -> None:
        self.metrics = metrics

    async def ping(self, conn: Any) -> str:
        return "pong"

    async def version(self, conn: Any) -> VersionInfo:
        return VersionInfo(version=__version__, protocol=PROTOCOL_VERSION)

    async def get_metrics(self, conn: Any) -> dict[str, Any]:
        return self.metrics.snapshot()
