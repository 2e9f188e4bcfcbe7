"""wconfd's RPC methods: the shell around the pure cores, one method per declaration."""

from __future__ import annotations

import logging

from client import __version__
from client.api.common import VersionInfo
from client.api.declare import MethodSpec
from client.api.wconfd import Identity
from client.daemon.server import Connection
from client.protocol import PROTOCOL_VERSION
from wconfd.clients import ClientRegistry

log = logging.getLogger(__name__)


class WConfdService:
    """Implements client.api.wconfd.WConfdApi; `guard` refuses calls before identify."""

    def __init__(self, sweep_interval: float = 5.0) -> None:
        self.clients = ClientRegistry(self._holds_anything, self._client_died, sweep_interval)

    def start(self) -> None:
        """Begin background work (the death sweep)."""
        self.clients.watcher.start()

    def close(self) -> None:
        """Stop background work."""
        self.clients.watcher.stop()

    def guard(self, conn: Connection, spec: MethodSpec) -> None:
        """Every method but identify/ping/version needs an identified connection."""
        if spec.options.identified:
            self.clients.require(conn)

    def disconnected(self, conn: Connection) -> None:
        """A connection closed: forget its client if it was the last and holds nothing."""
        self.clients.disconnected(conn)

    def _holds_anything(self, client_id: str) -> bool:
        return False

    def _client_died(self, client_id: str) -> None:
        log.info("released everything of dead client %s", client_id)

    # -- common ------------------------------------------------------------------------

    async def ping(self, conn: Connection) -> str:
        return "pong"

    async def version(self, conn: Connection) -> VersionInfo:
        return VersionInfo(version=__version__, protocol=PROTOCOL_VERSION)

    # -- identification ----------------------------------------------------------------

    async def identify(
        self, conn: Connection, job_id: int | None, pid: int, start_time: float, name: str | None
    ) -> Identity:
        client = self.clients.identify(conn, job_id, pid, start_time, name)
        return Identity(client_id=client.client_id)
