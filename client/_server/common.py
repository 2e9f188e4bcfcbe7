"""The methods every daemon answers alike (client.api.common.CommonApi): ping, version,
get_metrics and get_role."""

from __future__ import annotations

from typing import Any

from client import __version__
from client._server.metrics import Registry
from client._server.roles import Role, SingleNode
from client.api.common import RoleInfo, VersionInfo
from client.protocol import PROTOCOL_VERSION


class CommonMethods:
    """ping, version, get_metrics and get_role over the daemon's own registry
    (`client.metrics.Registry(daemon)`, which the daemon updates as it works) and its role
    (default: the single node of a local store, named by $LW_NODE or the host name)."""

    role: Role = SingleNode()  # a subclass that sets no role of its own is a single node

    def __init__(self, metrics: Registry, role: Role | None = None) -> None:
        self.metrics = metrics
        if role is not None:
            self.role = role

    async def ping(self, conn: Any) -> str:
        return "pong"

    async def version(self, conn: Any) -> VersionInfo:
        return VersionInfo(version=__version__, protocol=PROTOCOL_VERSION)

    async def get_metrics(self, conn: Any) -> dict[str, Any]:
        return self.metrics.snapshot()

    async def get_role(self, conn: Any) -> RoleInfo:
        return self.role.info()
