"""The methods every daemon answers alike (client.api.common.CommonApi): ping and version."""

from __future__ import annotations

from typing import Any

from client import __version__
from client.api.common import VersionInfo
from client.protocol import PROTOCOL_VERSION


class CommonMethods:
    """Mixed into each daemon's service class."""

    async def ping(self, conn: Any) -> str:
        return "pong"

    async def version(self, conn: Any) -> VersionInfo:
        return VersionInfo(version=__version__, protocol=PROTOCOL_VERSION)
