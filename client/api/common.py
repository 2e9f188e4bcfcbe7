"""Methods both daemons serve (SPEC §3): ping and version."""

from __future__ import annotations

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
