"""The local durable store: an append-only journal with group commit, plus snapshots.

One `LocalStore` keeps one state machine's history in a directory:

    NAME.journal         framed msgpack records (journal.py), preallocated with zeros
    NAME.snapshot.json   indented JSON snapshot (snapshot.py) with the seq it includes

Durability and speed.  A write is `pwritev2(RWF_DSYNC)` into already-allocated,
already-synced space (one system call, and ext4 need not commit metadata), which costs
about one device flush.  Group commit: `append` queues the record and schedules one flush
for the loop's current round, so every record appended meanwhile shares that write; while
a write is in flight, new records queue for the next one.  Where the disk is fast (a write
under `inline_threshold`, default 2 ms) the write runs on the event-loop thread - a thread
hand-off costs ~100 µs here, as much as the flush itself; where it is slow the writes move to
the store's own thread so the loop never stalls for long (sync_mode "auto"; "inline" and
"thread" force one way).  Preallocation runs in that thread, off the loop.

Failure.  If a write or its sync fails (ENOSPC, EIO), the bytes are zeroed (or truncated
away) and synced again, and the batch's callers get StorageError: the journal stays as it
was.  If even that fails the store is *broken* (`broken` says why) and refuses every
further append; the daemon should exit and let recovery sort the file out.

Loading.  `open()` reads the snapshot (SnapshotCorruptError if unreadable), scans the
journal (a torn tail is ignored and truncated; damage before acknowledged data raises
JournalCorruptError), and returns the snapshot and the records after it, for the caller to
apply.  `recover()` does that plus applying, for any state type.

Live-path contract (SPEC §5: persist before applying): plan → `await append(record,
on_durable=apply)` → reply.  `on_durable` runs on the loop thread in record order as soon
as the record is durable, even if the awaiting task was cancelled meanwhile, so memory
never misses a durable record.  Plans that read state must not overlap (serialise them),
or be planned back to back and queued together with `append_nowait` (one write, all or
nothing).
"""

from __future__ import annotations

import asyncio
import errno
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar

import msgspec

from client.errors import StorageError

from .fileops import FileOps, dsync_supported
from .journal import HEADER, encode_frame
from .journal_io import IoResult, JournalFiles
from .seam import Loaded
from .snapshot import encode_snapshot, write_atomic

log = logging.getLogger("wconfd.storage")

S = TypeVar("S")
R = TypeVar("R")
SyncMode = Literal["auto", "inline", "thread"]


@dataclass
class StoreStats:
    """Counters for benchmarks and the daemon's status line."""

    appends: int = 0
    writes: int = 0
    inline_writes: int = 0
    write_seconds: float = 0.0
    max_batch: int = 0
    failed_writes: int = 0
    extensions: int = 0
    snapshots: int = 0
    last_snapshot_seconds: float = 0.0
    last_snapshot_bytes: int = 0


class _Pending:
    """A queued record: its payload, its waiter and callback; seq set when written."""

    __slots__ = ("fut", "on_durable", "payload", "record", "seq")

    def __init__(
        self,
        record: Any,
        payload: bytes,
        fut: asyncio.Future[int] | None,
        on_durable: Callable[[Any], Any] | None,
    ) -> None:
        self.record = record
        self.payload = payload
        self.fut = fut
        self.on_durable = on_durable
        self.seq = 0


class LocalStore(Generic[S, R]):
    """Journal + snapshot in a local directory; see the module docstring.

    `snapshot_type` and `record_type` are msgspec-decodable types (Structs, tagged unions,
    builtins).  Use the async API from one event loop, or the sync API when no loop runs
    appends; not both at once.
    """

    def __init__(
        self,
        directory: str | os.PathLike[str],
        name: str,
        *,
        snapshot_type: Any,
        record_type: Any,
        journal_limit: int = 4 << 20,
        snapshot_ratio: float = 2.0,
        prealloc: int = 1 << 20,
        sync_mode: SyncMode = "auto",
        inline_threshold: float = 0.002,
        indent: int = 1,
        file_ops: FileOps | None = None,
    ) -> None:
        """Configure a store; nothing is touched on disk until `open()`.

        `snapshot_type` / `record_type` are msgspec types (a Struct, a tagged union, a
        generic alias like dict[str, int]); subscript the class to type the store:
        `LocalStore[ConfigDocument, ConfigChange](dir, "config", ...)`.

        A snapshot is due when the journal holds more than
        max(journal_limit, snapshot_ratio * last snapshot size) bytes.
        """
        self.directory = os.fspath(directory)
        self.name = name
        self._files = JournalFiles(self.directory, name, file_ops or FileOps())
        self.journal_path = self._files.journal_path
        self.snapshot_path = self._files.snapshot_path
        self._snapshot_type = snapshot_type
        self._encoder = msgspec.msgpack.Encoder()
        self._decoder: msgspec.msgpack.Decoder[R] = msgspec.msgpack.Decoder(record_type)
        self._json_encoder = msgspec.json.Encoder()
        self.journal_limit = journal_limit
        self.snapshot_ratio = snapshot_ratio
        self.prealloc = prealloc
        self.sync_mode: SyncMode = sync_mode
        self.inline_threshold = inline_threshold
        self.indent = indent
        self.stats = StoreStats()
        self.broken: str | None = None
        self._fd: int | None = None
        self._dsync = dsync_supported()
        self._pos = 0
        self._alloc_end = 0
        self._file_first_seq = 1
        self._offsets: list[int] = []
        self._snapshot_seq = 0
        self._snapshot_bytes = 0
        self._durable_seq = 0
        self._queue: list[_Pending] = []
        self._inflight = False
        self._extending = False
        self._extend_backoff = 0
        self._flush_scheduled = False
        self._paused = 0
        self._snapshotting = False
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._ewma = 0.0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None

    # ---------------------------------------------------------------- properties

    @property
    def last_seq(self) -> int:
        """The seq of the last durable record (0 if none ever)."""
        return self._durable_seq

    @property
    def snapshot_seq(self) -> int:
        """The seq the current snapshot includes."""
        return self._snapshot_seq

    @property
    def journal_bytes(self) -> int:
        """Bytes of records in the current journal file."""
        return self._pos

    @property
    def snapshot_due(self) -> bool:
        """Whether the journal has outgrown its bound and no snapshot is running."""
        bound = max(self.journal_limit, int(self.snapshot_ratio * self._snapshot_bytes))
        return self._pos >= bound and not self._snapshotting and self._fd is not None

    @property
    def pending(self) -> int:
        """Records queued or being written."""
        return len(self._queue)

    # --------------------------------------------------------------------- load

    def open(self) -> Loaded[S, R]:
        """Load snapshot and journal, repair a torn tail, and get ready to append.

        SnapshotCorruptError / JournalCorruptError when the stored state cannot be
        trusted; the daemon must then stop.
        """
        if self._fd is not None:
            raise RuntimeError(f"store {self.name} is already open")
        found = self._files.load(self._snapshot_type, self._decoder)
        self._snapshot_bytes = found.snapshot_bytes
        self._fd = found.fd
        self._pos = found.end
        self._alloc_end = found.size
        self._offsets = found.offsets
        self._file_first_seq = found.first_seq
        self._snapshot_seq = found.loaded.snapshot_seq
        self._durable_seq = found.loaded.last_seq
        self.broken = None
        return found.loaded

    # ------------------------------------------------------------------- append

    async def append(self, record: R, on_durable: Callable[[R], Any] | None = None) -> int:
        """Make `record` durable; return its seq.  Shares a write with concurrent appends.

        `on_durable(record)` runs on the loop thread, in seq order, once it is durable,
        even if this call was cancelled meanwhile (use it to apply the change to memory).
        StorageError if the write failed (nothing was written, `on_durable` not called).
        """
        return await self.append_nowait(record, on_durable)

    def append_nowait(
        self, record: R, on_durable: Callable[[R], Any] | None = None
    ) -> asyncio.Future[int]:
        """Queue `record` at once; the returned future is what `append` awaits.

        The flush runs in a later loop round, never inside this call, so records queued
        back to back (no await between them) go to disk in one write: all become durable,
        in order, or all fail.  That lets a caller plan several records, each against the
        state the previous ones will leave, and commit them as one group.  StorageError
        at once if the store is broken or closed.
        """
        self._check_writable()
        loop = self._bind_loop()
        fut: asyncio.Future[int] = loop.create_future()
        self._queue.append(_Pending(record, self._encoder.encode(record), fut, on_durable))
        self.stats.appends += 1
        self._kick()
        return fut

    def append_sync(self, record: R) -> int:
        """Blocking append (start-up, tools, tests): durable when it returns."""
        self._check_writable()
        if self._queue or self._inflight or self._extending:
            raise RuntimeError("append_sync while asynchronous appends are in flight")
        item = _Pending(record, self._encoder.encode(record), None, None)
        self.stats.appends += 1
        if self._needs_extension():
            self._finish_extension(
                *self._files.extend(self._fd_(), self._alloc_end, self._target())
            )
        self._run_batch_inline([item])
        return item.seq

    def _check_writable(self) -> None:
        """StorageError if the store is broken or not open."""
        if self.broken is not None:
            raise StorageError(f"{self.name} store is broken ({self.broken}); restart wconfd")
        if self._fd is None:
            raise StorageError(f"{self.name} store is not open")

    def _fd_(self) -> int:
        """The journal fd (the store is open)."""
        assert self._fd is not None
        return self._fd

    def _bind_loop(self) -> asyncio.AbstractEventLoop:
        """The running loop; rebinding is allowed while nothing is in flight."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:
            if self._queue or self._inflight or self._extending:
                raise RuntimeError("store used from two event loops")
            self._loop = loop
            self._flush_scheduled = False
        return loop

    def _kick(self) -> None:
        """Schedule a flush for this loop round if records wait and nothing blocks it."""
        if (
            self._queue
            and not self._flush_scheduled
            and not self._inflight
            and not self._paused
            and self._loop is not None
        ):
            self._flush_scheduled = True
            self._loop.call_soon(self._flush)

    def _use_thread(self) -> bool:
        """Whether this write goes to the store thread (slow disk or forced)."""
        if self.sync_mode == "auto":
            return self._ewma >= self.inline_threshold
        return self.sync_mode == "thread"

    def _flush(self) -> None:
        """Write every queued record as one batch (group commit)."""
        self._flush_scheduled = False
        if self._inflight or self._paused or not self._queue or self._fd is None:
            return
        size = sum(len(p.payload) + HEADER.size for p in self._queue)
        if self._pos + size > self._alloc_end and self._extending:
            return  # the extension in flight will make room; it kicks when done
        batch, self._queue = self._queue, []
        if self._use_thread():
            self._inflight = True
            data, start = self._frames(batch)
            loop = self._loop
            assert loop is not None
            future = loop.run_in_executor(
                self._executor_(),
                self._files.write_batch,
                self._fd,
                data,
                start,
                self._alloc_end,
                self._dsync,
            )
            future.add_done_callback(lambda f: self._after_thread_batch(batch, start, data, f))
        else:
            self._run_batch_inline(batch)
            self._kick()
            self._maybe_extend()

    def _after_thread_batch(
        self, batch: list[_Pending], start: int, data: bytes, future: asyncio.Future[IoResult]
    ) -> None:
        """Completion of a batch written by the store thread (on the loop thread)."""
        self._inflight = False
        try:
            result = future.result()
        except Exception as exc:  # not an OSError: a bug; fail the batch, stop writing
            result = IoResult(
                0.0, OSError(errno.EIO, repr(exc)), f"write crashed: {exc!r}", self._dsync
            )
        self._finish_batch(batch, start, len(data), result)
        self._wake_idle()
        self._kick()
        self._maybe_extend()

    def _run_batch_inline(self, batch: list[_Pending]) -> None:
        """Write a batch on this thread and complete it."""
        data, start = self._frames(batch)
        self._inflight = True
        try:
            result = self._files.write_batch(self._fd_(), data, start, self._alloc_end, self._dsync)
        finally:
            self._inflight = False
        self.stats.inline_writes += 1
        error = self._finish_batch(batch, start, len(data), result)
        if error is not None and batch[0].fut is None:
            raise error

    def _frames(self, batch: list[_Pending]) -> tuple[bytes, int]:
        """Assign seqs and frame the batch; (bytes, file offset)."""
        first = self._durable_seq + 1
        for i, item in enumerate(batch):
            item.seq = first + i
        data = b"".join(encode_frame(p.payload, p.seq, first) for p in batch)
        return data, self._pos

    def _finish_batch(
        self, batch: list[_Pending], start: int, length: int, result: IoResult
    ) -> StorageError | None:
        """Account for a written batch: resolve waiters (running `on_durable` in order), or
        fail them all with StorageError (also returned)."""
        self.stats.writes += 1
        self.stats.write_seconds += result.elapsed
        self.stats.max_batch = max(self.stats.max_batch, len(batch))
        self._ewma = 0.8 * self._ewma + 0.2 * result.elapsed
        self._dsync = result.dsync
        if result.error is not None:
            self.stats.failed_writes += 1
            if result.broken is not None:
                self.broken = result.broken
                log.error("%s: %s", self.journal_path, result.broken)
            err = result.error
            exc = StorageError(
                f"writing the {self.name} journal failed: {err.strerror or err}; "
                "nothing was changed",
                {"errno": err.errno},
            )
            for item in batch:
                if item.fut is not None and not item.fut.done():
                    item.fut.set_exception(exc)
            return exc
        pos = start
        for item in batch:
            self._offsets.append(pos)
            pos += len(item.payload) + HEADER.size
        self._pos = start + length
        self._alloc_end = max(self._alloc_end, self._pos)
        self._durable_seq = batch[-1].seq
        for item in batch:
            error: BaseException | None = None
            if item.on_durable is not None:
                try:
                    item.on_durable(item.record)
                except Exception as exc:  # a bug in the caller; report it to the waiter
                    log.exception("on_durable callback failed for record seq %d", item.seq)
                    error = exc
            if item.fut is not None and not item.fut.done():
                if error is None:
                    item.fut.set_result(item.seq)
                else:
                    item.fut.set_exception(error)
        return None

    # ----------------------------------------------------------- preallocation

    def _target(self) -> int:
        """Where the preallocated region should end after the next extension."""
        return self._pos + self.prealloc

    def _needs_extension(self) -> bool:
        """Whether less than half the preallocation is left ahead of the write position."""
        return (
            self.prealloc > 0
            and self._alloc_end - self._pos < self.prealloc // 2
            and self._pos >= self._extend_backoff
        )

    def _maybe_extend(self) -> None:
        """Start a background extension of the preallocated region if it runs low."""
        if (
            self._extending
            or self._inflight
            or self._paused
            or self._fd is None
            or not self._needs_extension()
        ):
            return
        loop = self._loop
        if loop is None:
            return
        self._extending = True
        future = loop.run_in_executor(
            self._executor_(), self._files.extend, self._fd, self._alloc_end, self._target()
        )

        def done(f: asyncio.Future[tuple[int, int, OSError | None]]) -> None:
            self._extending = False
            try:
                outcome = f.result()
            except Exception as exc:  # not an OSError: a bug; just stop preallocating
                outcome = (self._alloc_end, self._alloc_end, OSError(errno.EIO, repr(exc)))
            self._finish_extension(*outcome)
            self._wake_idle()
            self._kick()

        future.add_done_callback(done)

    def _finish_extension(self, start: int, end: int, error: OSError | None) -> None:
        """Record the new preallocated end (on the loop thread)."""
        self.stats.extensions += 1
        if error is not None:
            log.warning("%s: could not preallocate journal space: %s", self.journal_path, error)
            self._extend_backoff = self._pos + self.prealloc
            return
        if start == self._alloc_end:
            self._alloc_end = max(self._alloc_end, end)

    # ---------------------------------------------------------------- snapshot

    def snapshot(self, state: S | bytes, seq: int | None = None) -> asyncio.Future[bool]:
        """Write `state` as the snapshot and restart the journal after `seq`; await the
        returned future (True when done, False if a snapshot was already running).

        `state` (the state, or its compact JSON bytes) is encoded and `seq` (default
        `last_seq`, right when every record is applied through `on_durable`) is read *at
        this call*, so they match.  StorageError if writing failed (the old snapshot and
        journal stay valid).  Appends continue meanwhile; they pause only while the
        journal restarts.  Must be called on the event loop.
        """
        loop = asyncio.get_running_loop()
        if self._snapshotting:
            done: asyncio.Future[bool] = loop.create_future()
            done.set_result(False)
            return done
        seq = self._check_snapshot_seq(seq)
        body = state if isinstance(state, bytes) else self._json_encoder.encode(state)
        self._bind_loop()
        self._snapshotting = True
        return asyncio.ensure_future(self._snapshot_task(body, seq))

    async def _snapshot_task(self, body: bytes, seq: int) -> bool:
        """The I/O of `snapshot`: file off the loop, then the journal restart."""
        loop = asyncio.get_running_loop()
        t0 = time.perf_counter()
        try:
            chunks = await loop.run_in_executor(
                None, encode_snapshot, self.name, seq, body, self.indent
            )
            try:
                await loop.run_in_executor(
                    None, write_atomic, self.snapshot_path, chunks, self._files.ops
                )
            except OSError as exc:
                raise StorageError(f"writing the {self.name} snapshot failed: {exc}") from None
            self._snapshot_done(seq, sum(map(len, chunks)), t0)
            self._paused += 1
            try:
                while self._inflight or self._extending:
                    waiter: asyncio.Future[None] = loop.create_future()
                    self._idle_waiters.append(waiter)
                    await waiter
                tail = self._tail_range(seq)
                fd = self._fd_()
                new = await loop.run_in_executor(
                    self._executor_(), self._files.rotate, fd, *tail, self.prealloc
                )
                self._finish_rotate(seq, tail, new)
            finally:
                self._paused -= 1
                self._kick()
        finally:
            self._snapshotting = False
        return True

    def snapshot_sync(self, state: S | bytes, seq: int | None = None) -> None:
        """Blocking `snapshot` (start-up, tools, tests)."""
        if self._queue or self._inflight or self._extending:
            raise RuntimeError("snapshot_sync while asynchronous appends are in flight")
        seq = self._check_snapshot_seq(seq)
        body = state if isinstance(state, bytes) else self._json_encoder.encode(state)
        t0 = time.perf_counter()
        chunks = encode_snapshot(self.name, seq, body, self.indent)
        try:
            write_atomic(self.snapshot_path, chunks, self._files.ops)
        except OSError as exc:
            raise StorageError(f"writing the {self.name} snapshot failed: {exc}") from None
        self._snapshot_done(seq, sum(map(len, chunks)), t0)
        tail = self._tail_range(seq)
        self._finish_rotate(seq, tail, self._files.rotate(self._fd_(), *tail, self.prealloc))

    def _check_snapshot_seq(self, seq: int | None) -> int:
        """The snapshot's seq: default the last durable one; must be within the journal."""
        if self._fd is None:
            raise StorageError(f"{self.name} store is not open")
        seq = self._durable_seq if seq is None else seq
        if not self._snapshot_seq <= seq <= self._durable_seq:
            raise ValueError(
                f"snapshot seq {seq} outside [{self._snapshot_seq}, {self._durable_seq}]"
            )
        return seq

    def _snapshot_done(self, seq: int, size: int, t0: float) -> None:
        """Bookkeeping once the snapshot file is in place."""
        self._snapshot_seq = seq
        self._snapshot_bytes = size
        self.stats.snapshots += 1
        self.stats.last_snapshot_bytes = size
        self.stats.last_snapshot_seconds = time.perf_counter() - t0

    def _tail_range(self, seq: int) -> tuple[int, int]:
        """Byte range of the current journal holding the records after `seq`."""
        index = seq + 1 - self._file_first_seq
        start = self._offsets[index] if 0 <= index < len(self._offsets) else self._pos
        return start, self._pos

    def _finish_rotate(
        self, seq: int, tail: tuple[int, int], new: tuple[int | None, OSError | None]
    ) -> None:
        """Switch to the restarted journal (on the loop thread)."""
        new_fd, error = new
        if new_fd is None:
            raise StorageError(
                f"the {self.name} snapshot was written but the journal could not be "
                f"restarted: {error}"
            )
        start, end = tail
        old_fd = self._fd_()
        index = seq + 1 - self._file_first_seq
        kept = self._offsets[index:] if index >= 0 else []
        self._offsets = [off - start for off in kept]
        self._file_first_seq = seq + 1
        self._pos = end - start
        self._alloc_end = self._pos + max(0, self.prealloc)
        self._extend_backoff = 0
        self._fd = new_fd
        self._files.ops.close(old_fd)

    # ------------------------------------------------------------------ close

    def _executor_(self) -> ThreadPoolExecutor:
        """The store's own I/O thread (created on first use)."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix=f"lw-store-{self.name}")
        return self._executor

    def _wake_idle(self) -> None:
        """Wake snapshot tasks waiting for in-flight I/O to finish."""
        waiters, self._idle_waiters = self._idle_waiters, []
        for waiter in waiters:
            if not waiter.done():
                waiter.set_result(None)

    async def aclose(self) -> None:
        """Wait for queued and in-flight writes, then close."""
        loop = self._bind_loop()
        while self._queue or self._inflight or self._extending or self._snapshotting:
            waiter: asyncio.Future[None] = loop.create_future()
            self._idle_waiters.append(waiter)
            self._kick()
            await asyncio.wait([waiter], timeout=0.01)
        self.close()

    def close(self) -> None:
        """Close the journal and stop the I/O thread; queued appends fail with
        StorageError.  Idempotent."""
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        queue, self._queue = self._queue, []
        for item in queue:
            if item.fut is not None and not item.fut.done():
                item.fut.set_exception(StorageError(f"{self.name} store closed"))
        if self._fd is not None:
            self._files.ops.close(self._fd)
            self._fd = None
