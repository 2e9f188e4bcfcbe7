"""The local durable store: an append-only journal with group commit, plus snapshots.

One `LocalStore` keeps one state machine's history in a directory:

    NAME.journal         framed msgpack records (journal_format.py), preallocated with zeros
    NAME.snapshot.json   JSON snapshot (snapshot.py) with the seq it includes

Speed.  Group commit: `append` queues the record and schedules one flush for the loop's
current round, so every record appended meanwhile shares that write; while a write is
in flight, new records queue for the next one.  Whether a batch is written on the
event-loop thread or on the store's own thread is client._server.write_placement's
choice: on the loop unless the disk is slow, even when batches are shared.  The file
I/O itself (RWF_DSYNC writes into preallocated space, undo on failure) is journal_io.py;
positions and preallocation are layout.py; a batch's framing and callers are batch.py.
If a write fails and cannot be undone the store is *broken* (`broken` says why) and
refuses every further append.

What it promises (ordering, durability before the answer, atomic batches, failure) is
the DurableStore contract of seam.py.  `open()` drops a torn journal tail; damage before
acknowledged data raises JournalCorruptError, an unreadable snapshot SnapshotCorruptError.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Generic, TypeVar

import msgspec

from client._server.write_placement import SyncMode, WritePlacement
from client.errors import StorageError

from .batch import Pending, StoreStats, complete_batch, fail_batch, frame_batch, frame_sizes
from .fileops import FileOps, dsync_supported
from .journal_io import IoResult, JournalFiles
from .layout import JournalLayout
from .seam import Loaded

log = logging.getLogger("wconfd.storage")

S = TypeVar("S")
R = TypeVar("R")


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
        indent: int = -1,
        file_ops: FileOps | None = None,
    ) -> None:
        """Configure a store; nothing is touched on disk until `open()`.

        `snapshot_type` / `record_type` are msgspec types (Struct, tagged union, alias).

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
        self._placement = WritePlacement(sync_mode, inline_threshold, thread_for_shared=False)
        self.indent = indent
        self.stats = StoreStats()
        self.broken: str | None = None
        self._fd: int | None = None
        self._dsync = dsync_supported()
        self._layout = JournalLayout()
        self._snapshot_seq = 0
        self._snapshot_bytes = 0
        self._durable_seq = 0
        self._queue: list[Pending] = []
        self._inflight = False
        self._extending = False
        self._flush_scheduled = False
        self._paused = 0
        self._snapshotting = False
        self._idle_waiters: list[asyncio.Future[None]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._executor: ThreadPoolExecutor | None = None

    # ---------------------------------------------------------------- properties

    @property
    def durable_seq(self) -> int:
        """The seq of the last durable record."""
        return self._durable_seq

    @property
    def snapshot_seq(self) -> int:
        """The seq the current snapshot includes."""
        return self._snapshot_seq

    @property
    def journal_bytes(self) -> int:
        """Bytes of records in the current journal file."""
        return self._layout.pos

    @property
    def snapshot_due(self) -> bool:
        """Whether the journal has outgrown its bound and no snapshot is running."""
        bound = max(self.journal_limit, int(self.snapshot_ratio * self._snapshot_bytes))
        return self._layout.pos >= bound and not self._snapshotting and self._fd is not None

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
        self._layout = JournalLayout(found.end, found.size, found.offsets, found.first_seq)
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
        self._queue.append(Pending(record, self._encoder.encode(record), fut, on_durable))
        self.stats.appends += 1
        self._kick()
        return fut

    def append_sync(self, record: R) -> int:
        """Blocking append (start-up, tools, tests): durable when it returns."""
        self._check_writable()
        if self._queue or self._inflight or self._extending:
            raise RuntimeError("append_sync while asynchronous appends are in flight")
        item = Pending(record, self._encoder.encode(record), None, None)
        self.stats.appends += 1
        layout = self._layout
        if layout.needs_extension(self.prealloc):
            self._finish_extension(
                *self._files.extend(
                    self._fd_(), layout.alloc_end, layout.extension_target(self.prealloc)
                )
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

    def _flush(self) -> None:
        """Write every queued record as one batch (group commit)."""
        self._flush_scheduled = False
        if self._inflight or self._paused or not self._queue or self._fd is None:
            return
        size = sum(frame_sizes(self._queue))
        if self._layout.pos + size > self._layout.alloc_end and self._extending:
            return  # the extension in flight will make room; it kicks when done
        batch, self._queue = self._queue, []
        if self._placement.use_thread():
            self._inflight = True
            data, start = frame_batch(batch, self._durable_seq + 1), self._layout.pos
            loop = self._loop
            assert loop is not None
            where = (self._fd, start, self._layout.alloc_end, self._dsync)
            self._executor_().submit(self._write_on_thread, loop, batch, data, where)
        else:
            self._run_batch_inline(batch)
            self._kick()
            self._maybe_extend()

    def _write_on_thread(
        self,
        loop: asyncio.AbstractEventLoop,
        batch: list[Pending],
        data: bytes,
        where: tuple[int, int, int, bool],
    ) -> None:
        """On the store thread: write the batch at `where` (fd, start, preallocated end,
        RWF_DSYNC), then hand the outcome straight to the loop: one call_soon_threadsafe,
        no futures to chain (each batch's hand-off is on the contended lock path)."""
        fd, start, alloc_end, dsync = where
        try:
            result = self._files.write_batch(fd, data, start, alloc_end, dsync)
        except Exception as exc:  # not an OSError: a bug; fail the batch, stop writing
            result = IoResult(0.0, OSError(errno.EIO, repr(exc)), f"write crashed: {exc!r}", dsync)
        with contextlib.suppress(RuntimeError):  # the loop was closed meanwhile
            loop.call_soon_threadsafe(self._after_thread_batch, batch, start, len(data), result)

    def _after_thread_batch(
        self, batch: list[Pending], start: int, length: int, result: IoResult
    ) -> None:
        """Completion of a batch written by the store thread (on the loop thread)."""
        self._inflight = False
        self._finish_batch(batch, start, length, result)
        self._wake_idle()
        self._kick()
        self._maybe_extend()

    def _run_batch_inline(self, batch: list[Pending]) -> None:
        """Write a batch on this thread and complete it."""
        data, start = frame_batch(batch, self._durable_seq + 1), self._layout.pos
        self._inflight = True
        try:
            result = self._files.write_batch(
                self._fd_(), data, start, self._layout.alloc_end, self._dsync
            )
        finally:
            self._inflight = False
        self.stats.inline_writes += 1
        error = self._finish_batch(batch, start, len(data), result)
        if error is not None and batch[0].fut is None:
            raise error

    def _finish_batch(
        self, batch: list[Pending], start: int, length: int, result: IoResult
    ) -> StorageError | None:
        """Account for a written batch: resolve waiters (running `on_durable` in order), or
        fail them all with StorageError (also returned)."""
        self.stats.wrote(result.elapsed)
        self.stats.max_batch = max(self.stats.max_batch, len(batch))
        self._placement.wrote(len(batch), result.elapsed)
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
            fail_batch(batch, exc)
            return exc
        self._layout.placed(start, frame_sizes(batch))
        self._durable_seq = batch[-1].seq
        complete_batch(batch)
        return None

    # ----------------------------------------------------------- preallocation

    def _maybe_extend(self) -> None:
        """Start a background extension of the preallocated region if it runs low."""
        if (
            self._extending
            or self._inflight
            or self._paused
            or self._fd is None
            or not self._layout.needs_extension(self.prealloc)
        ):
            return
        loop = self._loop
        if loop is None:
            return
        self._extending = True
        start, target = self._layout.alloc_end, self._layout.extension_target(self.prealloc)
        future = loop.run_in_executor(
            self._executor_(), self._files.extend, self._fd, start, target
        )

        def done(f: asyncio.Future[tuple[int, int, OSError | None]]) -> None:
            self._extending = False
            try:
                outcome = f.result()
            except Exception as exc:  # not an OSError: a bug; just stop preallocating
                outcome = (start, start, OSError(errno.EIO, repr(exc)))
            self._finish_extension(*outcome)
            self._wake_idle()
            self._kick()

        future.add_done_callback(done)

    def _finish_extension(self, start: int, end: int, error: OSError | None) -> None:
        """Record the new preallocated end (on the loop thread)."""
        self.stats.extensions += 1
        if error is not None:
            log.warning("%s: could not preallocate journal space: %s", self.journal_path, error)
        self._layout.extended(start, end, error is not None, self.prealloc)

    # ---------------------------------------------------------------- snapshot

    def snapshot(self, state: S | bytes, seq: int | None = None) -> asyncio.Future[bool]:
        """Write `state` as the snapshot and restart the journal after `seq`; await the
        returned future (True when done, False if a snapshot was already running).

        `state` (the state, or its JSON bytes) and `seq` (default: the last durable
        record's) are taken at this call, so they match.  StorageError if writing failed
        (the old snapshot and journal stay valid).  Appends pause only while the journal
        restarts.  Must be called on the event loop.
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
            size = await loop.run_in_executor(
                None, self._files.write_snapshot, seq, body, self.indent
            )
            self._snapshot_done(seq, size, t0)
            self._paused += 1
            try:
                while self._inflight or self._extending:
                    waiter: asyncio.Future[None] = loop.create_future()
                    self._idle_waiters.append(waiter)
                    await waiter
                tail = self._layout.tail_range(seq)
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
        self._snapshot_done(seq, self._files.write_snapshot(seq, body, self.indent), t0)
        tail = self._layout.tail_range(seq)
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
        old_fd = self._fd_()
        self._layout.restarted(seq, tail, self.prealloc)
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
