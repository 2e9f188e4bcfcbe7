"""wconfd's configuration methods (docs/contracts.md#configuration-methods): the shell
around ConfigState.

Every write is planned against the current state, checked for the locks it needs and for
what its kind must satisfy (`ObjectCheck`, the one place a per-kind object check plugs
in), made durable, and only then applied to memory (Persistence.submit), so a failed
write leaves the state as it was.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, cast

import msgspec

from client.api.wconfd import Kind, NodeRoom, UpdateResult
from client.capacity import eligible
from client.errors import InvalidParams
from client.filterrules import check_filter_object
from wconfd.clients import Client
from wconfd.config import check_kind, check_locks
from wconfd.config.objects import Node
from wconfd.config.state import Plan
from wconfd.locking import EXCLUSIVE, LockManager
from wconfd.persistence import Persistence, PlanFn

log = logging.getLogger(__name__)

# Checks an object as the client sent it, before the config core converts it (kind, the
# object); raises a typed error (FilterError, ...) to refuse the write.
ObjectCheck = Callable[[str, Any], None]


def check_object(kind: str, obj: Any) -> None:
    """What the config core's types cannot say: a filter rule gets the add-time checks of
    docs/contracts.md#filters that luxid's replace_filter makes (one checker,
    client.filterrules), so both paths refuse the same rules with FilterError."""
    if kind == "filter":
        check_filter_object(obj)


class ConfigService:
    """The configuration methods; writes go through `persistence`, lock enforcement reads
    `locks()`."""

    def __init__(
        self,
        persistence: Persistence,
        locks: Callable[[], LockManager],
        object_check: ObjectCheck = check_object,
    ) -> None:
        self.persistence = persistence
        self._locks = locks
        self._object_check = object_check

    def _plan(self, client: Client, kind: str, plan_of: Callable[[float], Plan]) -> PlanFn:
        """A config write's PlanFn: plan, then enforce the locks it needs."""
        owner = client.client_id

        def plan(now: float) -> tuple[Any, Any]:
            p = plan_of(now)
            if p.record is None:
                return None, p.result
            self._enforce(owner, kind, p)
            return p.record, p.result

        return plan

    def _enforce(self, owner: str, kind: str, plan: Plan) -> None:
        allocation = self._locks().allocation

        def holds_exclusive(lock: str) -> bool:
            return allocation.mode_of(owner, lock) == EXCLUSIVE

        warning = check_locks(
            check_kind(kind),
            plan.locks,
            holds_exclusive,
            self.persistence.state.config.cluster.lock_enforcement,
        )
        if warning:
            log.warning("%r: %r", owner, warning)

    # -- reads -------------------------------------------------------------------------

    async def get_config(self, client: Client) -> Any:
        return msgspec.Raw(self.persistence.state.config.get_config_json())

    async def get_object(self, client: Client, kind: Kind, key: str | None) -> Any:
        if key is None and kind != "cluster":
            raise InvalidParams(f"param `key`: a {kind} is found by uuid or name; give one")
        return self.persistence.state.config.get_object(kind, key)

    async def list_objects(self, client: Client, kind: Kind) -> list[Any]:
        return list(self.persistence.state.config.list_objects(kind))

    async def get_node_rooms(self, client: Client, nodes: list[str] | None) -> list[NodeRoom]:
        config = self.persistence.state.config
        if nodes is None:
            found = cast(list[Node], list(config.list_objects("node")))  # by name
        else:
            named = {(node := cast(Node, config.get_object("node", n))).uuid: node for n in nodes}
            found = sorted(named.values(), key=lambda node: node.name)
        ratio = config.cluster.ipolicy.vcpu_ratio
        rooms = []
        for node in found:
            mused, cused = config.room_used(node.uuid)
            ok = eligible(node.offline, node.drained, node.vm_capable)
            rooms.append(NodeRoom(node.uuid, node.name, node.mtotal, node.ctotal, ratio,
                                  mused, cused, ok))  # fmt: skip
        return rooms

    async def wait_config_change(self, client: Client, since_serial: int, timeout: float) -> int:
        if timeout < 0:
            raise InvalidParams("param `timeout`: must be >= 0")
        return await self.persistence.wait_config_change(since_serial, timeout)

    # -- writes ------------------------------------------------------------------------

    async def add_object(self, client: Client, kind: Kind, object: dict[str, Any]) -> Any:
        self._object_check(kind, object)
        config = self.persistence.state.config
        return await self.persistence.submit(
            self._plan(client, kind, lambda now: config.add_object(kind, object, now))
        )

    async def update_object(
        self, client: Client, kind: Kind, object: dict[str, Any]
    ) -> UpdateResult:
        self._object_check(kind, object)
        config = self.persistence.state.config
        result = await self.persistence.submit(
            self._plan(client, kind, lambda now: config.update_object(kind, object, now))
        )
        return UpdateResult(serial_no=result["serial_no"], mtime=result["mtime"])

    async def remove_object(self, client: Client, kind: Kind, key: str) -> None:
        config = self.persistence.state.config
        await self.persistence.submit(
            self._plan(client, kind, lambda now: config.remove_object(kind, key, now))
        )
