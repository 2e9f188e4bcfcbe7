"""luxid's filter writes: the one owner of adding, replacing and removing a filter rule.

Both the RPC methods (`replace_filter`, `delete_filter`) and the queue drain (its rule)
write rules through `FilterWrites`, so a rule is written the same way whoever asks:

1. to wconfd, through luxid.wconfd_link (the configuration keeps the rules, so they
   survive both daemons' restarts); a new or replaced rule's watermark is the last job id
   handed out, so the rule concerns the jobs submitted after it;
2. then into the queue's one filter set, with a scheduling pass requested, before the
   write answers: what `query_filters` shows afterwards is what the next submit and the
   next pass are judged by;
3. and its event (`filter/<uuid>`, docs/contracts.md#events) into the job store, also
   before the write answers.  The rule itself is durable in wconfd first: a crash between
   the two steps loses the event, never the rule, and never hands an index out twice.
"""

from __future__ import annotations

from typing import Any

from client.filterrules import FilterRule
from luxid.queue import Queue
from luxid.wconfd_link import WconfdLink


class FilterWrites:
    """Writes filter rules to wconfd, then into the queue's filter set."""

    def __init__(self, link: WconfdLink, queue: Queue) -> None:
        self.link = link
        self.queue = queue

    async def put(
        self, uuid: str | None, priority: int, predicates: list[Any], action: Any, reason: list[Any]
    ) -> FilterRule:
        """Add or replace a rule (watermark: the last job id); the rule as stored."""
        rule = await self.link.replace_filter(
            uuid, priority, predicates, action, reason, watermark=self.queue.last_job_id
        )
        await self.queue.rule_written(rule)
        return rule

    async def drop(self, uuid: str) -> None:
        """Remove a rule (NotFound if there is none)."""
        await self.link.delete_filter(uuid)
        await self.queue.rule_removed(uuid)
