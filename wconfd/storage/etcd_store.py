"""`EtcdStore`: wconfd's DurableStore on etcd, for the master of one term
(docs/contracts.md#replicated-control-plane).

The store of one term: a new master builds one, `load()`s the state at one revision, and
from then on every record becomes operations on the keys of etcd_keys.py, committed by the
term's `FencedWriter` before the record counts as durable. Group commit: records appended
while a commit is in flight, or back to back in one round of the event loop, go together
through `commit_many` (as few transactions as etcd allows), the config's top level riding
in each transaction's trailer.

What the seam promises (seam.py) and how it holds here:

- Ordering and durability before the answer: `on_durable` runs, in order, only after the
  transaction holding the record committed (a quorum has it).
- Failure: if nothing could be committed, or the outcome is unknown, or the term is over
  (`Fenced`), the batch fails and the store refuses every further append (it is *broken*):
  a batch spread over several transactions may be partly committed, and only a new load
  can tell. `on_lost(error)` then tells the daemon, which steps down; the next term - this
  node's or another's - loads what etcd has. So memory never holds what etcd does not.
- A record whose one change exceeds a transaction (`--max-txn-ops`, request size) is
  refused alone, before anything is queued: it fails its own call with StorageError.
- Events (docs/contracts.md#events): wconfd's are not stored in etcd; an `EventNote`
  is an empty change, and each record's events are numbered from the revision of the
  transaction that committed it (`revision`, read while its on_durable runs), so they
  grow across terms and never repeat.  A new term keeps none of the old term's.
- Snapshots: none; etcd keeps the current state (history is compacted by etcd's own
  `--auto-compaction-retention`).
- Never back in time: `known_serial` is the config serial this node already had durable
  in an earlier term. A load finding an older config, or none, refuses to serve it (etcd
  answering so has lost data: etcd-io/etcd#13766), and a fresh config is only ever
  written where no config key exists (a compare), never over one.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple, cast

from client._server.etcd.audit import EtcdAudit
from client._server.etcd.batching import MAX_TXN_BYTES, MAX_TXN_OPS, Change, change_size
from client._server.etcd.client import EtcdClient
from client._server.etcd.errors import EtcdError
from client._server.etcd.fencing import FencedWriter
from client._server.etcd.release import lost_data
from client._server.etcd.wire import KeyValue, RequestOp, cmp_create, prefix_end
from client.errors import RpcError, StorageError
from wconfd.config import ConfigChange
from wconfd.config.objects import ConfigDocument
from wconfd.config.reservations import Release, ReleaseAll, Reserve
from wconfd.durable_state import (
    AuditNote,
    DurableState,
    EventNote,
    LockChange,
    Record,
    Snapshot,
)
from wconfd.locking.names import RELEASE
from wconfd.storage.etcd_digest import ConfigDigest
from wconfd.storage.etcd_keys import (
    Decoded,
    Keys,
    Meta,
    config_ops,
    decode_state,
    document_ops,
    lock_ops,
    meta_op,
    reservation_ops,
)
from wconfd.storage.gc_pause import gc_paused
from wconfd.storage.seam import Loaded

log = logging.getLogger(__name__)

# Keys per range request while loading: the first page's, the most, and the bytes (keys
# and values) a page may grow to.  Each page is one round trip through etcd's JSON
# gateway, which costs etcd far more than the keys in it: at 100,000 instances, pages of
# 1,000 took 4.7 s and pages of 5,000 2.9 s.  Pages grow (doubling) while they stay small.
PAGE = 1000
MAX_PAGE = 10_000
PAGE_BYTES = 4 << 20
# Room a transaction keeps for the fence, the commit marker and the meta trailer.
RESERVED_OPS = 3


class _Queued(NamedTuple):
    record: Record
    change: Change
    meta: Meta | None  # the config's top level after this record (config records only)
    fut: asyncio.Future[int]
    on_durable: Callable[[Record], Any] | None


async def read_all(client: EtcdClient, keys: Keys) -> tuple[list[KeyValue], int]:
    """wconfd's keys (config, locks, reservations; not luxid's jobs nor the audit log),
    read at one revision (page by page), and the revision."""
    kvs: list[KeyValue] = []
    revision, limit = 0, PAGE
    for folder in (keys.config, keys.locks, keys.reservations):
        end = prefix_end(folder)
        start = folder
        while True:
            page = await client.range(start, range_end=end, limit=limit, revision=revision)
            revision = revision or page.header.revision
            kvs.extend(page.kvs)
            if not page.more:
                break
            start = page.kvs[-1].key + b"\0"
            size = sum(len(kv.key) + len(kv.value) for kv in page.kvs)
            if 2 * size <= PAGE_BYTES:
                limit = min(2 * limit, MAX_PAGE)
    return kvs, revision


def _decode(keys: Keys, kvs: list[KeyValue]) -> Decoded:
    """decode_state, without the cyclic collector running meanwhile (wconfd.storage.gc_pause)."""
    with gc_paused():
        return decode_state(keys, kvs)


class EtcdStore:
    """One term's store; see the module docstring. Not usable before `load()`; without
    a writer (a standby's) it never is."""

    def __init__(
        self,
        client: EtcdClient,
        writer: FencedWriter | None,
        *,
        prefix: str,
        node: str,
        on_lost: Callable[[StorageError], RpcError] | None = None,
        known_serial: int = 0,
    ) -> None:
        self.client = client
        self.known_serial = known_serial
        self.writer = writer
        self.keys = Keys(prefix)
        self.audit = EtcdAudit(client, prefix, "wconfd")
        self.node = node
        self.on_lost = on_lost
        # Told the seconds each committed batch took (the journal flush metric's etcd side).
        self.on_write: Callable[[float], object] | None = None
        self.nodes: dict[str, str] = {}  # owner -> node that granted what it holds
        self._loaded: Loaded[Snapshot, Record] | None = None
        self._durable_meta = Meta(0, 0.0, 0.0)  # the config's top level as committed
        self._digest = ConfigDigest(self.keys.config)  # of the config as queued
        self._held: dict[str, set[str]] = {}  # the locks etcd will hold once the queue commits
        self._queue: list[_Queued] = []
        self._flushing: asyncio.Task[None] | None = None
        self._broken: RpcError | None = StorageError("the etcd store is not loaded yet")
        self._seq = 0
        self.loaded_revision = 0  # the revision `load` read the state at
        self.revision = 0  # the commit revision of the record whose on_durable runs

    # -- loading --------------------------------------------------------------------------

    async def load(self, now: float | None = None) -> None:
        """Read the whole state at one revision (a fresh prefix gets the default config,
        written fenced, at once)."""
        if self.writer is None:
            raise StorageError("this node is not the master: it has no fenced writer")
        kvs, revision = await read_all(self.client, self.keys)
        self.loaded_revision = revision
        # Off the event loop: at 100,000 instances decoding takes seconds, and the loop
        # must keep the term's lease alive meanwhile.
        decoded = await asyncio.to_thread(_decode, self.keys, kvs)
        config = decoded.config
        found = 0 if config is None else config.serial_no
        if found < self.known_serial:
            what = "no configuration" if config is None else f"configuration serial {found}"
            raise lost_data(self.keys.root, what, f"serial {self.known_serial}")
        self._digest, checked = decoded.digest, decoded.checked
        if config is None:
            fresh = DurableState.fresh(time.time() if now is None else now).config.get_config()
            # Only where no config exists, should the read above have missed one.
            ops = document_ops(self.keys, fresh)
            await self.writer.commit(ops, [cmp_create(self.keys.meta, 0)])
            self._digest, checked = ConfigDigest.of_puts(self.keys.config, ops), True
            config = fresh
            log.info("etcd prefix %s was empty: wrote a fresh configuration", self.keys.root)
        elif not checked:
            log.info(
                "the configuration on etcd is not as a master left it (its digest differs, or "
                "it has none): checking every object as it loads"
            )
        snapshot = Snapshot(config=config, reservations=decoded.reservations, locks=decoded.locks)
        self._durable_meta = Meta(
            config.serial_no, config.ctime, config.mtime, config.version, self._digest.hex()
        )
        self._held = {owner: {lock for lock, _ in held} for owner, held in decoded.locks.items()}
        self.nodes = decoded.nodes
        self._loaded = Loaded(snapshot, 0, [], 0, 0, checked=checked)
        self._broken = None

    @property
    def checked(self) -> bool:
        """Whether the load found the config as a master left it (its digest matched)."""
        return self._loaded is not None and self._loaded.checked

    def vouch_for(self, document: ConfigDocument) -> None:
        """After a load that checked every object: from now on the digest is that of the
        objects as the checks left them.  Where etcd holds other bytes for an object (an
        object put by hand that the checks normalized), the next load then finds the
        digest differs and checks again."""
        self._digest = ConfigDigest.of_puts(self.keys.config, document_ops(self.keys, document))
        meta = self._durable_meta
        self._durable_meta = Meta(
            meta.serial_no, meta.ctime, meta.mtime, meta.version, self._digest.hex()
        )

    @property
    def durable_seq(self) -> int:
        """The seq of the last committed record (counted from this term's load)."""
        return self._seq

    @property
    def durable_serial(self) -> int:
        """The config serial etcd holds as far as this store knows (0 before a load)."""
        return max(self._durable_meta.serial_no, self.known_serial)

    def open(self) -> Loaded[Snapshot, Record]:
        """What `load()` read: the state as a snapshot, no records."""
        if self._loaded is None:
            raise StorageError("the etcd store is not loaded yet")
        return self._loaded

    # -- appends --------------------------------------------------------------------------

    def append_nowait(
        self, record: Record, on_durable: Callable[[Record], Any] | None = None
    ) -> asyncio.Future[int]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[int] = loop.create_future()
        if self._broken is not None:  # refused: the awaitable fails (NotMaster once deposed)
            fut.set_exception(self._broken)
            return fut
        try:
            change = Change(tuple(self._ops(record)))
        except StorageError as exc:
            fut.set_exception(exc)
            return fut
        meta = None
        changed = record.change if isinstance(record, AuditNote) else record
        if isinstance(changed, ConfigChange):
            self._digest.apply(change.ops)
            ctime, version = self._durable_meta.ctime, self._durable_meta.version
            meta = Meta(changed.serial_no, ctime, changed.mtime, version, self._digest.hex())
        self._queue.append(_Queued(record, change, meta, fut, on_durable))
        if self._flushing is None or self._flushing.done():
            self._flushing = loop.create_task(self._flush())
        return fut

    async def append(
        self, record: Record, on_durable: Callable[[Record], Any] | None = None
    ) -> int:
        return await self.append_nowait(record, on_durable)

    def append_sync(self, record: Record) -> int:
        raise StorageError("the etcd store has no blocking appends; use append()")

    def _ops(self, record: Record) -> list[RequestOp]:
        """The record's operations; StorageError (nothing changed) if they cannot be one
        transaction."""
        if isinstance(record, LockChange):
            # Changed in place (no copy: the cost follows the change,
            # docs/contracts.md#lock-rules); put back below if the change is refused.
            held = self._held.setdefault(record.client_id, set())
            added = {lk for lk, mode in record.pairs if mode != RELEASE and lk not in held}
            dropped = {lk for lk, mode in record.pairs if mode == RELEASE and lk in held}
            ops = lock_ops(self.keys, self.node, record.client_id, record.pairs, held)
        elif isinstance(record, Reserve | Release | ReleaseAll):
            ops = reservation_ops(self.keys, self.node, record)
        elif isinstance(record, ConfigChange):
            ops = config_ops(self.keys, record)
        elif isinstance(record, EventNote):
            ops = []  # events are numbered from the revision; etcd keeps none of wconfd's
        elif isinstance(record, AuditNote):  # the change, and its entries' keys
            ops = [] if record.change is None else self._ops(record.change)
            ops += self.audit.put_ops(record.entries)
        else:
            raise StorageError(f"the etcd store cannot store {type(record).__name__} records")
        size = change_size(Change(tuple(ops)))
        if len(ops) > MAX_TXN_OPS - RESERVED_OPS or size > MAX_TXN_BYTES - 4096:
            if isinstance(record, LockChange):
                held = self._held[record.client_id]
                held -= added
                held |= dropped
                if not held:
                    del self._held[record.client_id]
            raise StorageError(
                f"this change needs {len(ops)} etcd operations ({size} bytes), more than one "
                f"transaction carries ({MAX_TXN_OPS - RESERVED_OPS}, {MAX_TXN_BYTES - 4096}); "
                "split it into smaller calls"
            )
        if isinstance(record, LockChange):
            if not self._held[record.client_id]:
                del self._held[record.client_id]
            self.nodes[record.client_id] = self.node
        elif isinstance(record, Reserve):
            self.nodes[record.owner] = self.node
        return ops

    async def _flush(self) -> None:
        """Commit what is queued, batch after batch, until the queue is empty."""
        await asyncio.sleep(0)  # let the rest of this round queue its records
        while self._queue and self._broken is None:
            batch, self._queue = self._queue, []
            # The meta after each change: a transaction's trailer puts the one after its
            # last change (re-putting the committed one if it changed no config).
            metas: list[Meta] = []
            for q in batch:
                metas.append(q.meta or (metas[-1] if metas else self._durable_meta))
            has_meta = any(q.meta is not None for q in batch)

            def trailer(i: int, metas: list[Meta] = metas) -> RequestOp:
                return meta_op(self.keys, metas[i])

            assert self.writer is not None  # loaded, so it has one
            started = time.monotonic()
            try:
                outcomes = await self.writer.commit_many(
                    [q.change for q in batch], trailer=trailer if has_meta else None
                )
                failed = next((o for o in outcomes if isinstance(o, BaseException)), None)
                if failed is not None:  # no change of ours has compares: a bug
                    raise StorageError(f"an etcd transaction failed its conditions: {failed}")
            except (EtcdError, StorageError) as exc:
                self._fail(batch + self._queue, exc)
                self._queue = []
                return
            except Exception as exc:  # a bug: fail the calls, never leave them hanging
                log.exception("etcd commit failed")
                self._fail(batch + self._queue, StorageError(f"etcd commit failed: {exc}"))
                self._queue = []
                return
            self._durable_meta = metas[-1]
            if self.on_write is not None:
                self.on_write(time.monotonic() - started)
            for q, revision in zip(batch, outcomes, strict=True):
                self._seq += 1
                self.revision = cast(int, revision)
                if q.on_durable is not None:
                    q.on_durable(q.record)
                if not q.fut.done():
                    q.fut.set_result(self._seq)

    def _fail(self, batch: list[_Queued], exc: StorageError) -> None:
        """The batch's outcome is not known to be all-or-nothing: fail it, refuse more."""
        error: RpcError = exc
        if self.on_lost is not None:
            error = self.on_lost(exc)
        self._broken = error
        log.error("etcd store of node %s stops: %s", self.node, exc)
        for q in batch:
            if not q.fut.done():
                q.fut.set_exception(error)

    # -- the rest of the seam ---------------------------------------------------------------

    @property
    def snapshot_due(self) -> bool:
        return False

    def snapshot(self, state: Snapshot | bytes, seq: int | None = None) -> Awaitable[bool]:
        fut: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        fut.set_result(False)
        return fut

    def snapshot_sync(self, state: Snapshot | bytes, seq: int | None = None) -> None:
        """Nothing to do: etcd holds the current state itself."""

    def close(self) -> None:
        """Stop: queued appends fail with StorageError (a commit in flight still ends
        with its own outcome: it may have committed before the term ended)."""
        self.stop(StorageError("the etcd store was closed (this node stopped serving)"))

    def stop(self, error: RpcError) -> None:
        """Refuse appends with `error` from now on, and fail the queued ones with it."""
        if self._broken is None:
            self._broken = error
        queued, self._queue = self._queue, []
        for q in queued:
            if not q.fut.done():
                q.fut.set_exception(self._broken)
