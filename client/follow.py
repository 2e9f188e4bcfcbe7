"""Calling a method that pushes (docs/contracts.md#following-events): on a connection of its
own, the answer and then every notification the daemon sends, as an iterator.

A stub's method declared with `pushes` (follow_events) hands back a `Following` (sync) or
an `AsyncFollowing` (asyncio): the stub's own connection stays free for its calls, and
closing the follow closes its connection, which is how a follower stops.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from typing import TYPE_CHECKING, Any

import msgspec

from client import errors
from client.protocol import ErrorObject, RequestId, Response, encode

if TYPE_CHECKING:
    from client.api.declare import MethodSpec
    from client.stubs import _StubBase

_REQUEST_ID = 1
_SKIP: Any = object()  # a frame that is neither the answer nor one of the notifications


class _Frame(msgspec.Struct):
    """A frame on a following connection: the answer (with `id`) or a notification
    (with `method` and `params`)."""

    jsonrpc: str = "2.0"
    id: RequestId | msgspec.UnsetType = msgspec.UNSET
    method: str | None = None
    params: msgspec.Raw = msgspec.Raw(b"null")
    result: msgspec.Raw = msgspec.Raw(b"null")
    error: ErrorObject | None = None


_frames = msgspec.json.Decoder(_Frame)


class _Follow:
    """What both kinds share: the call, and turning each frame into a value."""

    def __init__(self, stub: _StubBase, spec: MethodSpec, params: dict[str, Any]) -> None:
        self._stub = stub
        self._spec = spec
        self._request = encode(
            {"jsonrpc": "2.0", "method": spec.name, "params": params, "id": _REQUEST_ID}
        )
        self._decoder = stub._decoders[spec.name]
        self._answered = False

    def _value(self, line: bytes) -> Any:
        """The value a frame carries (its errors raised typed); _SKIP for a frame of
        another kind."""
        try:
            frame = _frames.decode(line)
        except msgspec.DecodeError as exc:
            raise errors.ConnectionError(
                f"{self._spec.name}: a frame that is not JSON-RPC: {exc}"
            ) from None
        if frame.id == _REQUEST_ID and not self._answered:
            self._answered = True
            response = Response(id=frame.id, result=frame.result, error=frame.error)
            return self._stub._result(self._spec, response)
        if self._answered and frame.method == self._spec.options.pushes:
            return self._decoder.decode(frame.params)
        return _SKIP

    def _closed(self) -> errors.ConnectionError:
        return errors.ConnectionError(
            f"{self._spec.name}: {self._stub.socket_path} closed the connection (the daemon "
            "stopped or stopped serving); follow again from the last `last`"
        )


class Following(_Follow, Iterator[Any]):
    """A sync follow: iterate for the answer, then each notification (blocking)."""

    def __init__(self, stub: _StubBase, spec: MethodSpec, params: dict[str, Any]) -> None:
        super().__init__(stub, spec, params)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(stub.timeout)
            sock.connect(str(stub.socket_path))
            sock.sendall(self._request)
        except OSError as exc:
            sock.close()
            raise stub._unreachable(exc) from None
        self._sock = sock
        self._lines = sock.makefile("rb")

    def __next__(self) -> Any:
        while True:
            try:
                line = self._lines.readline()
            except TimeoutError:
                raise errors.Timeout(
                    f"{self._spec.name}: no answer from {self._stub.socket_path} "
                    f"within {self._stub.timeout} s"
                ) from None
            except (OSError, ValueError):  # closed meanwhile (by close() from elsewhere)
                line = b""
            if not line:
                raise self._closed()
            value = self._value(line)
            if value is not _SKIP:
                if self._sock.gettimeout() is not None:
                    self._sock.settimeout(None)  # notifications come when events do
                return value

    def close(self) -> None:
        """Stop following: the connection closes (a blocked iteration ends)."""
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._lines.close()
        self._sock.close()

    def __enter__(self) -> Following:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncFollowing(_Follow, AsyncIterator[Any]):
    """An asyncio follow: `async for` the answer, then each notification."""

    def __init__(self, stub: _StubBase, spec: MethodSpec, params: dict[str, Any]) -> None:
        super().__init__(stub, spec, params)
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def _open(self) -> asyncio.StreamReader:
        try:
            reader, self._writer = await asyncio.open_unix_connection(
                str(self._stub.socket_path), limit=2**31
            )
            self._writer.write(self._request)
        except OSError as exc:
            raise self._stub._unreachable(exc) from None
        self._reader = reader
        return reader

    async def __anext__(self) -> Any:
        reader = self._reader or await self._open()
        while True:
            if self._answered:
                line = await reader.readline()
            else:
                try:
                    line = await asyncio.wait_for(reader.readline(), self._stub.timeout)
                except TimeoutError:
                    raise errors.Timeout(
                        f"{self._spec.name}: no answer from {self._stub.socket_path} "
                        f"within {self._stub.timeout} s"
                    ) from None
            if not line:
                raise self._closed()
            value = self._value(line)
            if value is not _SKIP:
                return value

    async def aclose(self) -> None:
        """Stop following: the connection closes."""
        writer, self._writer = self._writer, None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def __aenter__(self) -> AsyncFollowing:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()
