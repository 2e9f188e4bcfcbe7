"""luxid's RPC methods: the shell around the queue's pure cores."""

from __future__ import annotations

from client import __version__
from client.api.common import VersionInfo
from client.daemon.server import Connection
from client.protocol import PROTOCOL_VERSION


class LuxidService:
    """Implements client.api.luxi.LuxiApi."""

    async def ping(self, conn: Connection) -> str:
        return "pong"

    async def version(self, conn: Connection) -> VersionInfo:
        return VersionInfo(version=__version__, protocol=PROTOCOL_VERSION)
