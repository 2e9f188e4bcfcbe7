"""Audit entries on etcd (docs/contracts.md#audit-log, LAYOUT.md): one key per entry,
`P/audit/<daemon>/<seq, 20 digits>`, its value the entry's JSON.  The daemon puts them in
the same transaction as the change they tell of; this module names the keys, reads them
back for `query_audit`, and applies retention.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import TYPE_CHECKING, Final

import msgspec

from client._server.audit_sql import write_file
from client._server.etcd.wire import RequestOp, op_put
from client.audit import RETENTION_COUNT, AuditEntry, Daemon, Query

if TYPE_CHECKING:  # a daemon on local files never loads the etcd client (start-up time)
    from client._server.etcd.client import EtcdClient

PAGE: Final = 1000
_DECODE: Final = msgspec.json.Decoder(AuditEntry).decode
_ENCODE: Final = msgspec.json.Encoder().encode
DAY: Final = 86_400.0


class EtcdAudit:
    """One daemon's audit keys under a prefix."""

    def __init__(self, client: EtcdClient, prefix: str, daemon: Daemon) -> None:
        self.client = client
        self.root = f"{prefix.rstrip('/')}/audit/{daemon}/".encode()
        self._end = self.root[:-1] + b"0"  # just past "<root>/"

    def key(self, seq: int) -> bytes:
        return self.root + b"%020d" % seq

    def put_ops(self, entries: list[AuditEntry]) -> list[RequestOp]:
        """The puts storing numbered `entries` (joined to the change's transaction)."""
        return [op_put(self.key(e.seq), _ENCODE(e)) for e in entries]

    async def last_seq(self) -> int:
        """The highest seq stored (0: none)."""
        found = await self.client.range(
            self.root, range_end=self._end, limit=1, keys_only=True, descending=True
        )
        return int(found.kvs[0].key[len(self.root) :]) if found.kvs else 0

    async def query(self, query: Query) -> list[AuditEntry]:
        """The entries `query` asks for, newest last: read newest first, page by page,
        until `limit` are found or the entries are older than `since`."""
        found: list[AuditEntry] = []
        end = self._end
        while len(found) < query.limit:
            page = await self.client.range(self.root, range_end=end, limit=PAGE, descending=True)
            for kv in page.kvs:
                entry = _DECODE(kv.value)
                if query.since is not None and entry.ts < query.since:
                    return found[::-1]
                if query.matches(entry):
                    found.append(entry)
                    if len(found) == query.limit:
                        break
            if not page.more or not page.kvs:
                break
            end = page.kvs[-1].key
        return found[::-1]

    async def every(self) -> list[AuditEntry]:
        """Every entry, oldest first (a backup's, a copy's)."""
        found: list[AuditEntry] = []
        start = self.root
        while True:
            page = await self.client.range(start, range_end=self._end, limit=PAGE)
            found += [_DECODE(kv.value) for kv in page.kvs]
            if not page.more or not page.kvs:
                return found
            start = page.kvs[-1].key + b"\0"

    async def export(self, target: Path) -> None:
        """Write every entry to a new audit file `target` (client._server.audit_sql)."""
        entries = await self.every()
        await asyncio.to_thread(write_file, target, entries)

    async def prune(self, days: float, count: int = RETENTION_COUNT) -> int:
        """Delete what retention no longer keeps (older than `days`, beyond the newest
        `count`): scans from the oldest up to the first entry kept.  How many went."""
        newest = await self.last_seq()
        cutoff = time.time() - days * DAY
        keep_from = max(1, newest - count + 1)
        start = self.root
        while True:
            page = await self.client.range(start, range_end=self._end, limit=PAGE)
            if not page.kvs:
                break
            young = next((kv for kv in page.kvs if _DECODE(kv.value).ts >= cutoff), None)
            if young is not None:
                keep_from = max(keep_from, int(young.key[len(self.root) :]))
                break
            if not page.more:
                keep_from = max(keep_from, newest + 1)
                break
            start = page.kvs[-1].key + b"\0"
        gone = await self.client.delete(self.root, range_end=self.key(keep_from))
        return int(gone.deleted)
