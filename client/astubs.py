"""The asyncio client stub: many calls in flight over one connection."""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from client import errors
from client.api.declare import Api, MethodSpec
from client.follow import AsyncFollowing
from client.protocol import Response, decode_response
from client.stubs import (
    _BACKOFF_MAX,
    _BACKOFF_MIN,
    _RETRY_PAUSE,
    DEFAULT_PATIENCE,
    _Broken,
    _StubBase,
)


class AsyncStub(_StubBase):
    """asyncio stub: many calls in flight over one connection, matched by id."""

    def __init_subclass__(cls, api: type[Api] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if api is not None:
            cls._bind_api(api, _async_method)

    if TYPE_CHECKING:

        def __getattr__(self, name: str) -> Callable[..., Awaitable[Any]]: ...

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        timeout: float = 60.0,
        patience: float = DEFAULT_PATIENCE,
        expect_daemon: bool = False,
        actor: str | None = None,
    ) -> None:
        super().__init__(socket_path, timeout, patience, expect_daemon, actor)
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._waiting: dict[int, asyncio.Future[Response]] = {}
        self._connecting: asyncio.Lock | None = None

    async def close(self) -> None:
        """Close the connection; calls in flight fail with ConnectionError."""
        writer, self._writer = self._writer, None
        if self._reader_task is not None:
            self._reader_task.cancel()
            self._reader_task = None
        if writer is not None:
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
        self._fail_waiting(EOFError("connection closed"))

    async def __aenter__(self) -> AsyncStub:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def _fail_waiting(self, cause: BaseException) -> None:
        waiting, self._waiting = self._waiting, {}
        for fut in waiting.values():
            if not fut.done():
                fut.set_exception(_Broken(cause, sent=True))

    async def _ensure_connected(self) -> asyncio.StreamWriter:
        if self._writer is not None and not self._writer.is_closing():
            return self._writer
        if self._connecting is None:
            self._connecting = asyncio.Lock()
        async with self._connecting:
            if self._writer is not None and not self._writer.is_closing():
                return self._writer
            await self._open()
            if self._writer is None:  # the daemon hung up right after answering identify
                raise _Broken(EOFError("the daemon closed the connection"), sent=False)
            return self._writer

    async def _open(self) -> None:
        started = time.monotonic()
        deadline = self._connect_deadline()
        delay = _BACKOFF_MIN
        while True:
            try:
                reader, writer = await asyncio.open_unix_connection(
                    str(self.socket_path), limit=2**31
                )
                break
            except OSError as exc:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._unreachable(exc, time.monotonic() - started) from None
                await asyncio.sleep(min(delay, left))
                delay = min(delay * 2, _BACKOFF_MAX)
        self._writer = writer
        self._was_connected = True
        self._reader_task = asyncio.get_running_loop().create_task(self._read(reader))
        ident = self._identify_params()
        if ident is not None:
            spec = self._api.methods()["identify"]
            try:
                response = await self._exchange(writer, spec, ident, self.timeout)
            except _Broken as broken:
                raise _Broken(broken.cause, sent=False) from None
            self._on_identified(self._result(spec, response))

    def _on_identified(self, result: Any) -> None:
        """Hook for stubs that identify: keep what identify answered."""

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while True:
                line = await reader.readline()
                if not line:
                    raise EOFError("the daemon closed the connection")
                response = decode_response(line)
                fut = self._waiting.pop(response.id, None) if isinstance(response.id, int) else None
                if fut is not None and not fut.done():
                    fut.set_result(response)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            if self._writer is not None:
                self._writer.close()
            self._writer = None
            self._fail_waiting(exc)

    async def _exchange(
        self,
        writer: asyncio.StreamWriter,
        spec: MethodSpec,
        params: dict[str, Any],
        timeout: float | None,
    ) -> Response:
        request_id, frame = self._request(spec, params)
        fut: asyncio.Future[Response] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = fut
        try:
            writer.write(frame)
        except OSError as exc:
            self._waiting.pop(request_id, None)
            raise _Broken(exc, sent=False) from None
        try:
            return await asyncio.wait_for(fut, timeout)
        except TimeoutError:
            raise errors.Timeout(
                f"{spec.name}: no answer from {self.socket_path} within {timeout} s"
            ) from None
        finally:
            self._waiting.pop(request_id, None)

    async def _invoke(self, spec: MethodSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        params = self._params(spec, args, kwargs)
        timeout = self._call_timeout(spec, params)
        deadline: float | None = None
        while True:
            try:
                writer = await self._ensure_connected()
                return self._result(spec, await self._exchange(writer, spec, params, timeout))
            except _Broken as broken:
                await self.close()
                deadline = self._retry_deadline(spec, broken, deadline)
                await asyncio.sleep(_RETRY_PAUSE)


def _async_method(spec: MethodSpec) -> Callable[..., Any]:
    if spec.options.pushes:

        def follow(self: AsyncStub, *args: Any, **kwargs: Any) -> AsyncFollowing:
            return AsyncFollowing(self, spec, self._params(spec, args, kwargs))

        return follow

    async def call(self: AsyncStub, *args: Any, **kwargs: Any) -> Any:
        return await self._invoke(spec, args, kwargs)

    return call
