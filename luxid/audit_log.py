"""luxid's audit log (docs/contracts.md#audit-log): entries live in the job store (SQLite's
`audit` table, or etcd keys), written in the transaction of the change they tell of (the
group commit takes an audited call's entry into its first write); a call that wrote
nothing gets a write of its own.  Retention runs at a term's start and then every
PRUNE_INTERVAL seconds.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Final

from client.audit import AuditEntry, Query
from luxid.storage import JobStore
from luxid.storage.group_commit import GroupCommit

log = logging.getLogger(__name__)

PRUNE_INTERVAL: Final = 600.0


class LuxidAudit:
    """luxid's AuditBook over the job store and its group commit."""

    def __init__(self, store: JobStore, writer: GroupCommit, days: float) -> None:
        self.store = store
        self.writer = writer
        self.days = days
        self._pruner: asyncio.Task[None] | None = None

    async def record(self, entries: list[AuditEntry]) -> None:
        """Commit `entries` in a write of their own (numbered by the store)."""
        await self.writer.run(lambda tx: tx.append_audit(entries))

    async def query(self, query: Query) -> list[AuditEntry]:
        """The entries `query` asks for, newest last (read off the event loop)."""
        return await asyncio.to_thread(self.store.query_audit, query)

    def start(self) -> None:
        """Apply retention now and every PRUNE_INTERVAL seconds, until `stop`."""
        self._pruner = asyncio.get_running_loop().create_task(self._prune_now_and_then())

    def stop(self) -> None:
        if self._pruner is not None:
            self._pruner.cancel()

    async def _prune_now_and_then(self) -> None:
        while True:
            try:
                gone = await self.writer.call(lambda s: s.prune_audit(time.time(), self.days))
            except Exception as exc:  # the next round tries again
                log.warning("audit log: retention failed: %s", exc)
            else:
                if gone:
                    log.info("audit log: dropped %d entries past retention", gone)
            await asyncio.sleep(PRUNE_INTERVAL)
