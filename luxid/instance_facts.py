"""The instances' tags and states as luxid follows them for the disruption budgets
(docs/contracts.md#disruption-budgets), read again only where they changed.

A full read lists every instance; after it, a change of the configuration reads only the
instances wconfd's `config` events name since the last read (docs/contracts.md#events),
so a drain of 1,000 instances, whose every move changes the configuration, costs one
small read per move instead of a list of every instance.  The events are asked for
before the list (`watch_events` with no topic answers the newest index at once), so a
change between the two is read again, never missed.  Whenever the events cannot tell —
some were no longer kept, too many at once, wconfd's indexes began again, or the events
of the change that woke the reader do not show within SETTLE s (wconfd shows events in
steps while others follow them) — the follower lists every instance again.

`version` grows only when some instance's facts changed (a migration changes none), so
the budget book is rebuilt only then.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Final

from client import AsyncWConfdClient, errors
from luxid.budgets import InstanceFacts, instance_facts

# The most changed instances read one by one; more are listed whole.
MOST_SINGLE_READS: Final = 64
# How long to wait for the events of a change to show before listing everything.
SETTLE: Final = 1.0
_PAGE: Final = 1000  # events asked for at once (a full page: list everything)
_PREFIX: Final = "instance/"


class InstanceFollower:
    """The facts of every instance, by uuid, kept up to date from wconfd."""

    def __init__(self, client: AsyncWConfdClient) -> None:
        self.client = client
        self.facts: dict[str, InstanceFacts] = {}
        self.version = 0  # grows when `facts` changed
        self._cursor: int | None = None  # None: the next read lists everything
        self._serial = -1  # the configuration serial the facts are at least as new as
        self._lock = asyncio.Lock()  # one read at a time (the follower, set_budget)

    def forget(self) -> None:
        """No budget needs the instances now: the next read lists them again."""
        self._cursor = None
        self.facts = {}

    async def read(self, serial: int = -1) -> Mapping[str, InstanceFacts]:
        """The facts at the configuration's `serial` or newer (-1: as wconfd has them)."""
        async with self._lock:
            changed = None if self._cursor is None else await self._changed(self._cursor, serial)
            if changed is None:
                await self._list()
            else:
                for uuid in changed:
                    await self._read_one(uuid)
            return self.facts

    async def _changed(self, cursor: int, serial: int) -> set[str] | None:
        """The uuids of the instances changed after event `cursor`, once the events reach
        the configuration's `serial`; None: list them all."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + SETTLE
        changed: set[str] = set()
        timeout = 0.0
        while True:
            try:
                batch = await self.client.watch_events(
                    after=cursor, topics=["config"], timeout=timeout, limit=_PAGE
                )
            except errors.InvalidParams:  # wconfd's indexes began again (a new state)
                return None
            if batch.gap or len(batch.events) >= _PAGE:
                return None
            for event in batch.events:
                self._serial = max(self._serial, int(event.data.get("config_serial") or 0))
                if event.key.startswith(_PREFIX) and event.data.get("kind") == "instance":
                    changed.add(str(event.data.get("uuid")))
            cursor = batch.last
            timeout = deadline - loop.time()
            if self._serial >= serial or timeout <= 0:
                break
        if self._serial < serial or len(changed) > MOST_SINGLE_READS:
            return None
        self._cursor = cursor
        return changed

    async def _list(self) -> None:
        """Every instance; the events after `cursor` (taken first) are read again next."""
        cursor = (await self.client.watch_events(after=0, topics=[], timeout=0)).last
        serial = await self.client.wait_config_change(since_serial=-1, timeout=0)
        objects = await self.client.list_objects(kind="instance")
        self._set({str(obj["uuid"]): instance_facts(obj) for obj in objects})
        self._cursor, self._serial = cursor, serial

    async def _read_one(self, uuid: str) -> None:
        try:
            obj = await self.client.get_object(kind="instance", key=uuid)
        except errors.NotFound:
            if self.facts.pop(uuid, None) is not None:
                self.version += 1
            return
        facts = instance_facts(obj)
        if self.facts.get(uuid) != facts:
            self.facts[uuid] = facts
            self.version += 1

    def _set(self, facts: dict[str, InstanceFacts]) -> None:
        if facts != self.facts:
            self.facts = facts
            self.version += 1
