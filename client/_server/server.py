"""The JSON-RPC server loop over a Unix socket (docs/contracts.md#wire-protocol), shared by
wconfd and luxid.

One asyncio Protocol per connection splits the byte stream into lines and runs each
request in its own task, so a long call (a lock wait) never blocks the next request on
the same connection; answers go out as they are ready, each with its id.  Bad input —
invalid UTF-8 or JSON, bad envelopes, unknown methods, wrong params — is answered with
an error and the connection stays open; only a frame over the size limit closes it.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import grp
import logging
import os
import socket
import struct
import sys
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import msgspec

from client._server.dispatch import BIG_REQUEST, Handler, dispatch_one
from client.errors import InternalError, InvalidRequest, ParseError, RpcError
from client.protocol import (
    DEFAULT_MAX_MESSAGE_BYTES,
    decode_big_message,
    decode_message,
    encode,
)
from client.strictjson import JsonRefused

log = logging.getLogger(__name__)

_PEERCRED = struct.Struct("3i")
# A frame longer than this is decoded in a thread, in short pieces, so that the event loop
# answers the other connections meanwhile (docs/contracts.md#framing).
OFF_LOOP_BYTES = 1024 * 1024
# Values freed per step by release_in_pieces.
_RELEASE_STEP = 8192
# In-flight calls per connection before the server stops reading from it.
_HIGH_WATER = 512
_LOW_WATER = 128


class PeerCred(msgspec.Struct, frozen=True):
    """The peer process of a Unix socket connection, as the kernel reports it."""

    pid: int
    uid: int
    gid: int


def peer_credentials(sock: socket.socket) -> PeerCred:
    """SO_PEERCRED of a connected Unix socket: who is really on the other end."""
    raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
    return PeerCred(*_PEERCRED.unpack(raw))


# Python 3.12+ can start tasks eagerly (install_eager_tasks); 3.11 cannot.
_EAGER_TASKS = sys.version_info >= (3, 12)
# A result already encoded and at least this large is written as it is (Connection.send).
_WRITTEN_AS_IS = 4096
_RESULT_HEAD = b'{"jsonrpc":"2.0","result":'


def _eager_task_factory(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, Any], **kwargs: Any
) -> asyncio.Task[Any]:
    """asyncio's eager task factory, also for uvloop, which passes an `eager_start`
    argument of its own that the stdlib factory refuses."""
    kwargs["eager_start"] = True
    return asyncio.Task(coro, loop=loop, **kwargs)


def install_eager_tasks(loop: asyncio.AbstractEventLoop) -> None:
    """Make the loop start tasks eagerly (Python 3.12+; a no-op before)."""
    if _EAGER_TASKS:
        loop.set_task_factory(_eager_task_factory)  # type: ignore[arg-type]


async def _resume(coro: Coroutine[Any, None, None], waiting_on: Any) -> None:
    """Drive a coroutine whose first step ran eagerly and stopped on `waiting_on`.

    This is what asyncio's Task does for a coroutine it started itself: `waiting_on` is
    the future the coroutine yielded (None for a bare yield); once it is done the
    coroutine is resumed and reads the outcome itself.  A cancellation of this task
    cancels that future, so the coroutine sees the CancelledError at its await; one that
    arrives after the future completed is thrown into the coroutine.
    """
    while True:
        try:
            if waiting_on is None:
                await asyncio.sleep(0)
            else:
                waiting_on._asyncio_future_blocking = False  # as Task.__step does
                await waiting_on
        except asyncio.CancelledError as exc:
            if waiting_on is None or not waiting_on.cancelled():  # this task was cancelled
                try:
                    waiting_on = coro.throw(exc)
                except StopIteration:
                    return
                continue
        except Exception:
            pass
        try:
            waiting_on = coro.send(None)
        except StopIteration:
            return


def release_in_pieces(box: list[Any]) -> None:
    """Drop the value in `box` a piece at a time (in a thread): freeing a list of millions
    of values is one call that holds the GIL as long as decoding them did.  A container
    someone else still refers to (a daemon may keep part of a request) is only let go."""
    stack = [box.pop()]
    while stack:
        item = stack.pop()
        if sys.getrefcount(item) > 2:  # ours (`item`) and the call's argument: else shared
            continue
        if type(item) is list:
            while item:
                tail = item[-_RELEASE_STEP:]
                del item[-_RELEASE_STEP:]
                stack += [c for c in tail if type(c) is list or type(c) is dict]
                del tail
        elif type(item) is dict:
            while item:
                child = item.popitem()[1]
                if type(child) is list or type(child) is dict:
                    stack.append(child)
                del child


def _error_response(exc: RpcError, request_id: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "error": exc.to_wire(), "id": request_id}


class Connection(asyncio.Protocol):
    """One client connection: its peer, its session state and its calls in flight."""

    def __init__(self, server: RpcServer) -> None:
        self.server = server
        self.transport: asyncio.Transport | None = None
        self.peer = PeerCred(0, -1, -1)
        # Whatever the daemon keeps per connection (wconfd: the identified client).
        self.session: Any = None
        self.closed = False
        self.on_close: list[Callable[[Connection], None]] = []
        # Told when a write buffer that was full has drained (a follower's next push).
        self.on_writable: list[Callable[[Connection], None]] = []
        self._buffer = bytearray()
        self._scanned = 0
        self._tasks: set[asyncio.Task[None]] = set()
        # Its loop, looked up once (on 3.11 each lookup is a getpid system call).
        self._loop = asyncio.get_running_loop()
        self._reading_paused = False
        self._writing_paused = False

    # -- asyncio.Protocol -------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]
        sock = transport.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                self.peer = peer_credentials(sock)
        self.server.connections.add(self)
        self.server.on_connect(self)

    def data_received(self, data: bytes) -> None:
        buf = self._buffer
        buf += data
        limit = self.server.max_message_bytes
        start = 0
        while True:
            end = buf.find(b"\n", self._scanned)
            if end < 0:
                break
            if end - start > limit:
                return self._too_large()
            line = bytes(memoryview(buf)[start:end])  # one copy, not two
            start = end + 1
            self._scanned = start
            if line.strip():
                self._submit(line)
        if start:
            del buf[:start]
            self._scanned = 0
        self._scanned = len(buf)
        if len(buf) > limit:
            self._too_large()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.server.connections.discard(self)
        for task in list(self._tasks):
            task.cancel()
        for callback in self.on_close:
            try:
                callback(self)
            except Exception:
                log.exception("close callback failed")
        self.server.on_disconnect(self)

    def pause_writing(self) -> None:
        self._writing_paused = True
        self._update_reading()

    def resume_writing(self) -> None:
        self._writing_paused = False
        self._update_reading()
        for callback in list(self.on_writable):
            callback(self)

    # -- requests ---------------------------------------------------------------------

    def _too_large(self) -> None:
        limit = self.server.max_message_bytes
        log.warning("pid %s sent a message over %d bytes; closing", self.peer.pid, limit)
        self.send(
            _error_response(
                InvalidRequest(
                    f"message larger than {limit} bytes; split it or raise --max-message-bytes"
                )
            )
        )
        self._buffer.clear()
        self._scanned = 0
        if self.transport is not None:
            self.transport.close()

    def _submit(self, line: bytes) -> None:
        """Answer a line: run it at once, and keep a task only if it has to wait.

        Most calls (ping, reads, uncontended locks up to their journal write) finish or
        reach their first real wait in this step, without a trip through the scheduler.
        Python 3.12+ does this itself with eager tasks (`install_eager_tasks`; they run
        as the current task, which asyncio.timeout needs); on 3.11 the first step is
        taken here and `_resume` drives the rest.
        """
        coro = self._answer(line)
        loop = self._loop
        if _EAGER_TASKS:
            task = loop.create_task(coro)
            if task.done():
                return
        else:
            # The first step and the rest share one context, as a task's steps do: a
            # context variable a call sets (its audit record) is its own, and stays so.
            context = contextvars.copy_context()
            try:
                waiting_on = context.run(coro.send, None)
            except StopIteration:
                return
            task = loop.create_task(_resume(coro, waiting_on), context=context)
        self._tasks.add(task)
        task.add_done_callback(self._finished)
        self._update_reading()

    def _finished(self, task: asyncio.Task[None]) -> None:
        self._tasks.discard(task)
        self._update_reading()

    def _update_reading(self) -> None:
        if self.transport is None or self.closed:
            return
        busy = self._writing_paused or len(self._tasks) >= _HIGH_WATER
        if busy and not self._reading_paused:
            self._reading_paused = True
            self.transport.pause_reading()
        elif self._reading_paused and not self._writing_paused and len(self._tasks) <= _LOW_WATER:
            self._reading_paused = False
            self.transport.resume_reading()

    async def _answer(self, line: bytes) -> None:
        try:
            await self._dispatch(line)
        except Exception:
            log.exception("failed to answer a message from pid %s", self.peer.pid)
            self.send(
                _error_response(InternalError("internal error; the daemon log has the details"))
            )

    async def _dispatch(self, line: bytes) -> None:
        if len(line) > OFF_LOOP_BYTES:
            await self._dispatch_big(line)
            return
        try:
            message = decode_message(line)
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            self.send(_error_response(ParseError(f"not valid JSON: {exc}")))
            return
        except JsonRefused as exc:
            self.send(_error_response(InvalidRequest(f"not strict JSON: {exc}")))
            return
        await self._dispatch_message(message)

    async def _dispatch_big(self, line: bytes) -> None:
        """A big frame: decoded, its params checked and at last freed in threads, so that
        the event loop answers the other connections meanwhile (docs/contracts.md#framing)."""
        loop = self._loop
        try:
            box = [await loop.run_in_executor(None, decode_big_message, line)]
        except (msgspec.DecodeError, UnicodeDecodeError) as exc:
            self.send(_error_response(ParseError(f"not valid JSON: {exc}")))
            return
        except JsonRefused as exc:
            self.send(_error_response(InvalidRequest(f"not strict JSON: {exc}")))
            return
        BIG_REQUEST.set(True)  # in this call's own task: it has awaited already
        try:
            await self._dispatch_message(box[0])
        finally:
            loop.run_in_executor(None, release_in_pieces, box)

    async def _dispatch_message(self, message: Any) -> None:
        methods = self.server.methods
        if isinstance(message, list):
            if not message:
                self.send(_error_response(InvalidRequest("an empty batch is not a request")))
                return
            answers = await asyncio.gather(*(dispatch_one(m, methods, self) for m in message))
            replies = [a for a in answers if a is not None]
            if replies:
                self.send(replies)
            return
        answer = await dispatch_one(message, methods, self)
        if answer is not None:
            self.send(answer)

    def send(self, message: Any) -> None:
        """Write one frame unless the connection is gone.

        A large result already encoded (watch_events' answer, one for every follower at
        the same cursor) is written as it is, between the frame's head and tail, rather
        than copied into a frame of each follower's own."""
        if self.transport is None or self.transport.is_closing():
            return
        result = message.get("result") if type(message) is dict else None
        if type(result) is msgspec.Raw and len(result) >= _WRITTEN_AS_IS:
            tail = b',"id":' + msgspec.json.encode(message["id"]) + b"}\n"
            self.transport.writelines((_RESULT_HEAD, memoryview(result), tail))
        else:
            self.transport.write(encode(message))

    @property
    def writable(self) -> bool:
        """Whether a pushed frame would be written now rather than pile up: open, and the
        peer has read what was sent before (the transport's buffer under its high water)."""
        return not self._writing_paused and self.transport is not None and not self.closed

    def push(self, frame: bytes) -> None:
        """Write a notification the daemon sends unasked (docs/contracts.md#following-events),
        already encoded: the same bytes go to every follower at the same cursor."""
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(frame)

    def close(self) -> None:
        """Close the connection from this side (what was written still goes out first)."""
        if self.transport is not None:
            self.transport.close()


class RpcServer:
    """Serves a method table on a Unix socket with mode 0660 (group `group` if given)."""

    def __init__(
        self,
        socket_path: Path,
        methods: dict[str, Handler],
        *,
        max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
        group: str | None = None,
        on_connect: Callable[[Connection], None] | None = None,
        on_disconnect: Callable[[Connection], None] | None = None,
    ) -> None:
        self.socket_path = socket_path
        self.methods = methods
        self.max_message_bytes = max_message_bytes
        self.group = group
        self.on_connect = on_connect or (lambda conn: None)
        self.on_disconnect = on_disconnect or (lambda conn: None)
        self.connections: set[Connection] = set()
        self._server: asyncio.AbstractServer | None = None

    async def start(self) -> None:
        """Bind the socket (the caller has claimed the path) and start accepting."""
        loop = asyncio.get_running_loop()
        old_umask = os.umask(0o117)
        try:
            self._server = await loop.create_unix_server(
                lambda: Connection(self), path=str(self.socket_path), backlog=512
            )
        finally:
            os.umask(old_umask)
        os.chmod(self.socket_path, 0o660)
        if self.group:
            os.chown(self.socket_path, -1, grp.getgrnam(self.group).gr_gid)

    async def stop(self) -> None:
        """Stop accepting, close every connection and remove the socket file."""
        if self._server is not None:
            self._server.close()
        for conn in list(self.connections):
            if conn.transport is not None:
                conn.transport.close()
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 2)
        with contextlib.suppress(FileNotFoundError):
            self.socket_path.unlink()
