"""The methods every daemon answers alike (client.api.common.CommonApi): ping, version,
get_metrics, get_role, watch_events and follow_events.  (DaemonApi's `backup` is each daemon's own:
wconfd.backup, luxid.backup.)"""

from __future__ import annotations

from typing import Any

import msgspec

from client import __version__
from client._server.event_log import EventLog
from client._server.metrics import Registry
from client._server.roles import Role, SingleNode
from client.api.common import RoleInfo, VersionInfo
from client.events import EventRing
from client.protocol import PROTOCOL_VERSION


class CommonMethods:
    """ping, version, get_metrics, get_role and watch_events over the daemon's own
    registry (`client.metrics.Registry(daemon)`, which the daemon updates as it works),
    its role (default: the single node of a local store, named by $LW_NODE or the host
    name) and its event log (default: an empty one, for a daemon that keeps none)."""

    role: Role = SingleNode()  # a subclass that sets no role of its own is a single node

    def __init__(
        self, metrics: Registry, role: Role | None = None, events: EventLog | None = None
    ) -> None:
        self.metrics = metrics
        if role is not None:
            self.role = role
        self.events = events or EventLog(metrics.daemon, EventRing())

    async def ping(self, conn: Any) -> str:
        return "pong"

    async def version(self, conn: Any) -> VersionInfo:
        return VersionInfo(version=__version__, protocol=PROTOCOL_VERSION)

    async def get_metrics(self, conn: Any) -> dict[str, Any]:
        return self.metrics.snapshot()

    async def get_role(self, conn: Any) -> RoleInfo:
        return self.role.info()

    async def watch_events(
        self, conn: Any, after: int, topics: list[str] | None, timeout: float, limit: int
    ) -> msgspec.Raw:
        return await self.events.watch(after, topics, timeout, limit)

    async def follow_events(
        self, conn: Any, after: int, topics: list[str] | None, limit: int
    ) -> msgspec.Raw:
        return self.events.follow(conn, after, topics, limit)
