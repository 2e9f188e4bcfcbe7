"""Which control-plane nodes are up: `<prefix>/nodes/<node>` for as long as a node runs.

`lw cluster role` shows every node's role, but `lw` only reaches its own node's sockets; so
each node's wconfd keeps a key of its own under `<prefix>/nodes/`, on a lease it renews, and
any node can list them. A node that dies disappears when its lease lapses. Presence is
information only: it never decides who is master (the leader key does).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math

import msgspec

from client._server.etcd.background import Background
from client._server.etcd.client import EtcdClient
from client._server.etcd.errors import EtcdError

log = logging.getLogger(__name__)


class NodeInfo(msgspec.Struct, frozen=True):
    """What a node says about itself."""

    node: str
    since: float  # wall-clock time it came up


def nodes_prefix(prefix: str) -> str:
    return f"{prefix.rstrip('/')}/nodes/"


class Presence(Background):
    """Keeps this node's key alive until `stop()`; re-creates it if its lease was lost."""

    def __init__(self, client: EtcdClient, *, prefix: str, info: NodeInfo, ttl: float) -> None:
        super().__init__(f"presence-{info.node}")
        self.client = client
        self.info = info
        self.ttl = ttl
        self.key = nodes_prefix(prefix) + info.node
        self._lease = 0

    @property
    def lease(self) -> int:
        """The lease the key is on now (0 while it has none)."""
        return self._lease

    async def _release(self) -> None:
        """On `stop()`: remove the key now (best effort: otherwise it lapses with the lease)."""
        if self._lease:
            with contextlib.suppress(EtcdError):
                await self.client.lease_revoke(self._lease)
            self._lease = 0

    async def _run(self) -> None:
        while True:
            try:
                if not self._lease or await self.client.lease_keepalive(self._lease) <= 0:
                    lease = await self.client.lease_grant(math.ceil(self.ttl))
                    self._lease = lease.ID
                    await self.client.put(self.key, msgspec.json.encode(self.info), lease=lease.ID)
            except EtcdError as exc:
                log.warning("presence of %s: %s", self.info.node, exc)
                self._lease = 0  # start again with a new lease once etcd answers
            await asyncio.sleep(self.ttl / 3)


async def list_nodes(client: EtcdClient, prefix: str) -> list[NodeInfo]:
    """The nodes up now, by name (a key that is not a NodeInfo is skipped)."""
    answer = await client.range(nodes_prefix(prefix), prefix=True)
    nodes = []
    for kv in answer.kvs:
        try:
            nodes.append(msgspec.json.decode(kv.value, type=NodeInfo))
        except msgspec.DecodeError:
            log.warning("ignoring %r under the node list: not a node entry", kv.key)
    return nodes
