"""luxid's disruption budgets: the one owner of the budgets it judges by
(docs/contracts.md#disruption-budgets).

The budgets live in wconfd's configuration (luxid.wconfd_link writes and follows them),
with the instances' tags and states they need.  Every read of the configuration and every
write of luxid's own (`set_budget`, `delete_budget`) rebuilds the book
(luxid.budgets.build_book) and hands it to the scheduler before it answers, so what
`query_budgets` shows is what the next scheduling pass judges by.  A start past a budget
(an override) becomes the budget's event, durable in the job store.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from client import errors
from client._server.event_log import EventLog
from client.api.luxi import BudgetRow
from client.budgets import BudgetRecord, check_budget
from luxid.budgets import EMPTY_BOOK, BudgetBook, InstanceFacts, build_book
from luxid.events import budget_event
from luxid.queue import Queue
from luxid.wconfd_link import WconfdLink

EVENTS_KEPT: Final = 100  # per budget, in query_budgets


class BudgetService:
    """The budgets, their members, and the budget methods (see the module doc)."""

    def __init__(self, queue: Queue, link: WconfdLink, log: EventLog | None) -> None:
        self.queue = queue
        self.link = link
        self.log = log  # the kept events: the budgets' events after a restart
        self.records: dict[str, BudgetRecord] = {}
        self._instances: list[InstanceFacts] = []
        self._version = -1  # of the instances' facts (luxid.instance_facts)
        self._events: dict[str, list[tuple[float, str]]] | None = None  # read lazily

    @property
    def book(self) -> BudgetBook:
        """The book the scheduler judges by."""
        return self.queue.scheduler.budgets

    # -- what changes the book -----------------------------------------------------------

    def config_read(
        self,
        budgets: list[BudgetRecord],
        instances: Mapping[str, InstanceFacts] | None,
        version: int,
    ) -> None:
        """The link read the configuration: judge by its budgets and instances (the book
        is built again only if either changed; a migration changes neither)."""
        records = {b.name: b for b in budgets}
        if records == self.records and version == self._version:
            return
        self.records, self._version = records, version
        self._instances = list((instances or {}).values())
        self._rebuild()

    def _rebuild(self) -> None:
        book = build_book(self.records.values(), self._instances) if self.records else EMPTY_BOOK
        scheduler = self.queue.scheduler
        if book != scheduler.budgets:
            scheduler.budgets = book
            self.queue.request_pass()

    async def set_budget(
        self, name: str, tags: list[str], max_disrupted: int, actor: str | None
    ) -> BudgetRow:
        """Add or replace a budget; its row, judged by from now on."""
        check_budget(name, tags, max_disrupted)
        first = not self.records
        record = await self.link.write_budget(name, list(tags), max_disrupted)
        action = "update" if name in self.records else "add"
        self.records[name] = record
        if first:  # the instances were not followed without budgets: read them now
            self._instances = list((await self.link.instances.read()).values())
            self._version = self.link.instances.version
        self._rebuild()
        data = msgspec.to_builtins(record)
        if actor is not None:
            data["actor"] = actor
        await self.queue.live.record([budget_event(action, name, data, time.time())])
        return self.row(name)

    async def delete_budget(self, name: str, actor: str | None) -> None:
        """Remove a budget (NotFound if there is none)."""
        try:
            await self.link.delete_budget(name)
        except errors.NotFound:
            raise errors.NotFound(f"no budget named {name!r} (see `lw budget list`)") from None
        self.records.pop(name, None)
        self._rebuild()
        data: dict[str, Any] = {"name": name}
        if actor is not None:
            data["actor"] = actor
        await self.queue.live.record([budget_event("remove", name, data, time.time())])

    # -- starts past a budget --------------------------------------------------------------

    def exceeded(self, starts: Sequence[tuple[str, int, str]]) -> None:
        """Jobs were started past a budget (a pass's `exceeded`): record the events."""
        now = time.time()
        events = self._kept_events()
        for name, _, message in starts:
            kept = events.setdefault(name, [])
            kept.append((now, message))
            del kept[:-EVENTS_KEPT]
        drafts = [budget_event("event", name, {"message": m}, now) for name, _, m in starts]
        self.queue.live.note_events(drafts)

    def _kept_events(self) -> dict[str, list[tuple[float, str]]]:
        """The budgets' events, read once from the kept event log."""
        if self._events is None:
            self._events = {}
            for event in self.log.ring.kept() if self.log is not None else ():
                if event.topic == "budget" and event.action == "event":
                    kept = self._events.setdefault(event.key.removeprefix("budget/"), [])
                    kept.append((event.ts, str(event.data.get("message", ""))))
                    del kept[:-EVENTS_KEPT]
        return self._events

    # -- reads -----------------------------------------------------------------------------

    def rows(self, names: Iterable[str] | None = None) -> list[BudgetRow]:
        """query_budgets' rows, by name."""
        return [self.row(name) for name in sorted(self.records if names is None else names)]

    def row(self, name: str) -> BudgetRow:
        """One budget's row (NotFound if there is none)."""
        record = self.records.get(name)
        if record is None:
            raise errors.NotFound(f"no budget named {name!r} (see `lw budget list`)")
        book = self.book
        scheduler = self.queue.scheduler
        count = scheduler.budget_count(scheduler.running())
        disrupted = count.disrupted(name) if count is not None and name in book.budgets else []
        return BudgetRow(
            name=name,
            tags=list(record.tags),
            max_disrupted=record.max_disrupted,
            members=list(book.members.get(name, ())),
            disrupted=[[inst, why] for inst, why in disrupted],
            events=[[ts, message] for ts, message in self._kept_events().get(name, ())],
        )
