"""luxid's role on etcd (docs/contracts.md#replicated-control-plane): it serves only where
its node's wconfd is master.

wconfd holds the election; luxid only follows it. `LeaderFollower` reads
`<prefix>/leader` and watches it: its value is the master's node name and its create
revision the term (the fencing token luxid's writes compare). Each change calls
`on_change(master, term)` on the event loop. The watch is renewed every TTL by a fresh
read (a member that hangs cannot hide a change for long), and when etcd cannot be read
for longer than one TTL the follower reports "no master": wconfd's own lease lapses by
then, so luxid must not go on as master either.

`standby_methods` is the dispatch table while luxid does not serve: every method answers
NotMaster naming the master, except the ones a standby may answer
(docs/contracts.md#replicated-control-plane).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from client._server.common import CommonMethods
from client._server.dispatch import Handler
from client._server.etcd.background import Background
from client._server.etcd.client import EtcdClient
from client._server.etcd.errors import EtcdError
from client._server.etcd.wire import Event, KeyValue
from client._server.roles import STANDBY_METHODS, Role, settled_not_master
from client.api.declare import Api

log = logging.getLogger(__name__)


OnChange = Callable[[str | None, int], None]


class LeaderFollower(Background):
    """Follows `<prefix>/leader` and reports each change of (master, term)."""

    def __init__(self, client: EtcdClient, *, prefix: str, ttl: float, on_change: OnChange) -> None:
        super().__init__("luxid-leader-follower")
        self.client = client
        self.key = f"{prefix.rstrip('/')}/leader".encode()
        self.ttl = ttl
        self.on_change = on_change
        self.master: str | None = None
        self.term = 0
        self._confirmed = time.monotonic()
        self._revision = 0  # the etcd revision (master, term) was learnt at

    def _set(self, kv: KeyValue | None, revision: int) -> None:
        """Take what a read or a change at `revision` says, unless something newer is
        known (a read's answer may come after a later change)."""
        if revision < self._revision:
            return
        self._revision = revision
        master = kv.value.decode(errors="replace") if kv is not None else None
        term = kv.create_revision if kv is not None else 0
        if (master, term) != (self.master, self.term):
            self.master, self.term = master, term
            self.on_change(master, term)

    async def refresh(self) -> None:
        """Read the key now (after a pause the last change seen may be old)."""
        answer = await self.client.range(self.key)
        self._confirmed = time.monotonic()
        self._set(answer.kvs[0] if answer.kvs else None, answer.header.revision)

    async def _run(self) -> None:
        while True:
            try:
                answer = await self.client.range(self.key)
            except EtcdError as exc:
                if time.monotonic() - self._confirmed > self.ttl:
                    log.warning("cannot read the leader key for over %g s: %s", self.ttl, exc)
                    self._set(None, self._revision)
                await asyncio.sleep(self.ttl / 10)
                continue
            self._confirmed = time.monotonic()
            self._set(answer.kvs[0] if answer.kvs else None, answer.header.revision)
            await self._watch(answer.header.revision + 1)

    async def _watch(self, revision: int) -> None:
        """Apply the key's changes for one TTL at most (then the caller reads it again)."""

        def seen(event: Event) -> bool:
            self._set(None if event.type == "DELETE" else event.kv, event.kv.mod_revision)
            return False

        await self.client.watch_for(self.key, revision, self.ttl, seen)

    async def _release(self) -> None:
        """Nothing is held: luxid never writes the leader key."""


def standby_methods(api: type[Api], common: CommonMethods, role: Role) -> dict[str, Handler]:
    """The dispatch table of a standby luxid (no term, so no service to check the role
    in): `common` answers the standby methods, every other call NotMaster."""

    def refuse(name: str) -> Handler:
        async def handle(conn: Any, *args: Any, **kwargs: Any) -> Any:
            raise await settled_not_master(role)

        return handle

    def answer(func: Callable[..., Any]) -> Handler:
        async def handle(conn: Any, *args: Any, **kwargs: Any) -> Any:
            return await func(conn)

        return handle

    table: dict[str, Handler] = {}
    for name in api.methods():
        func = getattr(common, name, None) if name in STANDBY_METHODS else None
        table[name] = refuse(name) if func is None else answer(func)
    return table
