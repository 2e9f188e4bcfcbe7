"""luxid's link to wconfd: it follows the configuration and keeps the filters and the
disruption budgets there.

What of the configuration matters to the queue: `cluster.max_running_jobs`, the `filters`
(docs/contracts.md#filters: filters live in the configuration, so they persist with it and
survive both daemons' restarts), the `budgets` and, while there are budgets, the instances'
tags and states (docs/contracts.md#disruption-budgets; luxid.instance_facts reads only the
instances that changed).  `WconfdLink.follow` long-polls
`wait_config_change` and re-reads them whenever the configuration's serial moves, so a
change made by anyone (luxid itself, another luxid client, `lw` talking to wconfd directly)
reaches the queue within one round trip; there is no polling timer.  While wconfd cannot be
reached the link retries with a short back-off and the queue keeps its last settings.

A read that overlapped one of luxid's own filter or budget writes may predate it; it is
dropped (the write moved the configuration's serial, so the next read follows at once), so
the rules luxid judges by never step back behind what its own `replace_filter` or
`set_budget` answered.

Filter and budget writes need no lock (docs/contracts.md#lock-enforcement: queue control must never
wait for the queue).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import uuid as uuidlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import msgspec
from msgspec.structs import replace

from client import AsyncWConfdClient, errors
from client.api.wconfd import LockWait, UpdateResult
from client.budgets import BudgetRecord
from client.filterrules import FilterRule, make_rule, rule_from_wire, rule_to_wire, validate_uuid
from luxid.budgets import InstanceFacts
from luxid.instance_facts import InstanceFollower
from luxid.shutdown import bounded

log = logging.getLogger(__name__)

# How long one wait_config_change call waits before it is renewed.
FOLLOW_TIMEOUT = 30.0
RETRY_MIN, RETRY_MAX = 0.05, 1.0
# Attempts of a filter write that races with another writer of the same rule.
WRITE_ATTEMPTS = 5


@dataclass(frozen=True)
class ConfigRead:
    """What one read of the configuration hands to the queue: the instances' facts by
    uuid only while there are budgets (None otherwise: nothing needs them), with the
    follower's `instances_version` (it grows only when some instance's facts changed)."""

    max_running_jobs: int
    filters: list[Any]
    budgets: list[BudgetRecord]
    instances: Mapping[str, InstanceFacts] | None
    instances_version: int = 0


OnConfig = Callable[[ConfigRead], None]


class WconfdLink:
    """Follows the settings the queue needs and writes the filters (see the module doc)."""

    def __init__(self, socket_path: os.PathLike[str] | str) -> None:
        self.client = AsyncWConfdClient(socket_path, name="luxid")
        # Told max_running_jobs and the filters after every read that followed a change
        # (set by luxid.term: the queue takes the settings, then the drains re-plan).
        self.on_config: OnConfig | None = None
        self._task: asyncio.Task[None] | None = None
        self._writes_begun = 0  # luxid's own filter and budget writes, begun / ended
        self._writes_ended = 0
        self.instances = InstanceFollower(self.client)  # read while there are budgets

    def start(self) -> None:
        """Begin following the configuration in the background."""
        self._task = asyncio.get_running_loop().create_task(self.follow())

    async def close(self, timeout: float) -> None:
        """Stop following and close the connection, within `timeout` seconds."""
        if self._task is not None:
            self._task.cancel()
            await bounded(
                "the configuration follower",
                asyncio.gather(self._task, return_exceptions=True),
                timeout,
            )
        await bounded("the wconfd connection to close", self.client.close(), timeout)

    async def follow(self) -> None:
        """Read the settings, then again after every change of the configuration."""
        since = -1
        delay = RETRY_MIN
        failing = False
        while True:
            try:
                serial = await self.client.wait_config_change(
                    since_serial=since, timeout=FOLLOW_TIMEOUT if since >= 0 else 0
                )
                if serial != since:
                    if await self.refresh(serial):
                        since = serial
                    else:  # overlapped a write of ours: read again once it is done
                        await asyncio.sleep(RETRY_MIN / 10)
                if failing:
                    log.info("wconfd reachable again")
                failing, delay = False, RETRY_MIN
            except errors.RpcError as exc:
                if not failing:
                    log.warning("cannot follow the configuration: %s; retrying", exc.message)
                failing = True
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)

    async def refresh(self, serial: int = -1) -> bool:
        """Read what the queue needs now (at the configuration's `serial` or newer) and
        hand it over (`on_config`), unless one of luxid's own writes overlapped the read
        (see the module doc): then False, and the caller reads again."""
        begun = self._writes_begun
        if begun != self._writes_ended:
            return False
        client = self.client
        cluster, filters, budgets = await asyncio.gather(
            client.get_object(kind="cluster"),
            client.list_objects(kind="filter"),
            client.list_objects(kind="budget"),
        )
        if budgets:
            instances: Mapping[str, InstanceFacts] | None = await self.instances.read(serial)
        else:
            self.instances.forget()
            instances = None
        if self._writes_begun != begun:
            return False
        if self.on_config is not None:
            records = [msgspec.convert(b, BudgetRecord) for b in budgets]
            self.on_config(
                ConfigRead(
                    int(cluster["max_running_jobs"]), list(filters), records, instances,
                    self.instances.version,
                )
            )  # fmt: skip
        return True

    @contextlib.contextmanager
    def _own_write(self) -> Iterator[None]:
        """Count one of luxid's own writes, so that a read overlapping it is dropped
        (see the module doc)."""
        self._writes_begun += 1
        try:
            yield
        finally:
            self._writes_ended += 1

    async def lock_waits(self) -> list[LockWait]:
        """wconfd's lock waits: who waits for which lock, held by whom (why_job)."""
        return await self.client.lock_waits()

    # -- the drains' records and view ------------------------------------------------------

    async def get_config(self) -> Any:
        """The whole configuration (the drains build their view of the cluster from it)."""
        return await self.client.get_config()

    async def list_drains(self) -> list[Any]:
        """The stored drain records, as wconfd holds them."""
        return await self.client.list_objects(kind="drain")

    async def add_drain(self, record: dict[str, Any]) -> Any:
        """Store a new drain record; the record as stored."""
        return await self.client.add_object(kind="drain", object=record)

    async def update_drain(self, record: dict[str, Any]) -> UpdateResult:
        """Replace a stored drain record (StaleObjectError if it changed meanwhile)."""
        return await self.client.update_object(kind="drain", object=record)

    # -- filters -------------------------------------------------------------------------

    async def replace_filter(
        self,
        uuid: str | None,
        priority: Any,
        predicates: Any,
        action: Any,
        reason: Any,
        watermark: int,
    ) -> FilterRule:
        """Validate, then add or replace the rule in wconfd; the rule as stored.

        A rule that does not exist yet is added, even with a given uuid (Ganeti: upsert).
        Raises FilterError for a bad rule before anything is written.
        """
        key = validate_uuid(uuid) if uuid is not None else str(uuidlib.uuid4())
        rule = make_rule(
            key, priority, predicates, action, reason,
            watermark=watermark, now_ns=time.time_ns(),
        )  # fmt: skip
        with self._own_write():
            return await self._write_rule(rule)

    async def _write_rule(self, rule: FilterRule) -> FilterRule:
        key = rule.uuid
        for _ in range(WRITE_ATTEMPTS):
            try:
                stored = await self._get_filter(key)
                if stored is None:
                    added = await self.client.add_object(kind="filter", object=rule_to_wire(rule))
                    return rule_from_wire(added)
                current = replace(rule, serial_no=stored.serial_no, ctime=stored.ctime)
                result: UpdateResult = await self.client.update_object(
                    kind="filter", object=rule_to_wire(current)
                )
                return replace(current, serial_no=result.serial_no, mtime=result.mtime)
            except (errors.StaleObjectError, errors.AlreadyExists, errors.NotFound):
                continue  # another writer changed the rule meanwhile: read it again
        raise errors.StorageError(f"filter {key} keeps changing under us; try again")

    async def delete_filter(self, uuid: str) -> None:
        """Remove a rule from wconfd (NotFound if there is none)."""
        with self._own_write():
            await self.client.remove_object(kind="filter", key=uuid)

    async def _get_filter(self, uuid: str) -> FilterRule | None:
        try:
            return rule_from_wire(await self.client.get_object(kind="filter", key=uuid))
        except errors.NotFound:
            return None

    # -- budgets -------------------------------------------------------------------------

    async def write_budget(self, name: str, tags: list[str], max_disrupted: int) -> BudgetRecord:
        """Add the budget, or replace the one of that name (its serial grows); as stored."""
        with self._own_write():
            for _ in range(WRITE_ATTEMPTS):
                wire: dict[str, Any] = {"name": name, "tags": tags, "max_disrupted": max_disrupted}
                try:
                    try:
                        stored = await self.client.get_object(kind="budget", key=name)
                    except errors.NotFound:
                        added = await self.client.add_object(kind="budget", object=wire)
                        return msgspec.convert(added, BudgetRecord)
                    wire.update(serial=stored["serial"], ctime=stored["ctime"])
                    result = await self.client.update_object(kind="budget", object=wire)
                    wire.update(uuid=name, serial=result.serial_no, mtime=result.mtime)
                    return msgspec.convert(wire, BudgetRecord)
                except (errors.StaleObjectError, errors.AlreadyExists, errors.NotFound):
                    continue  # another writer changed the budget meanwhile: read it again
            raise errors.StorageError(f"budget {name} keeps changing under us; try again")

    async def delete_budget(self, name: str) -> None:
        """Remove a budget from wconfd (NotFound if there is none)."""
        with self._own_write():
            await self.client.remove_object(kind="budget", key=name)
