"""Methods both daemons serve (docs/contracts.md#common-methods): ping, version,
get_metrics, get_role."""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from client.api.declare import Api, rpc


class VersionInfo(msgspec.Struct, frozen=True):
    """What `version` answers."""

    version: str
    protocol: int


class RoleInfo(msgspec.Struct, frozen=True):
    """What `get_role` answers."""

    node: str
    role: Literal["master", "standby"]
    master: str | None
    term: int


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
        """The daemon's own counters, gauges and histograms (docs/contracts.md#observability),
        keyed by Prometheus name: a value, or [[{label: value}, value], ...]; a histogram as
        its _bucket (with `le`), _sum and _count series."""

    @rpc(identified=False, reissue=True)
    def get_role(self) -> RoleInfo:
        """This node's role in the control plane
        (docs/contracts.md#replicated-control-plane): its name, "master" or
        "standby", the master's node name (null while there is none) and the term (the
        leader key's create revision; 0 for a single node on local files). Answered on
        standbys too."""
