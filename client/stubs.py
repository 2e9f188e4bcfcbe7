"""Client stubs derived from the API declarations (docs/contracts.md#python-client-stubs):
the shared base and the blocking stub (the asyncio stub is in client.astubs, so sync callers
never import asyncio).

A stub class names its API once (`api=...`); every declared method becomes a method of
the stub with the same parameters.  Results are decoded with the declared result type;
error responses raise the `client.errors` class named by `data.type`.  A broken
connection is reopened (and re-identified) on the next call; a call marked `reissue`
in its declaration is sent again when the connection broke while it waited.

A daemon restart is ridden out (docs/contracts.md#reliability-and-security): once a stub has
reached its daemon, it keeps reconnecting with a back-off for `patience` seconds (default
minutes, what a job process needs; the interactive `lw` passes a short one), re-identifies,
re-sends what never reached the daemon and what its declaration marks safe to re-send, and
only then gives up with a ConnectionError that names the daemon and how long it waited.
`expect_daemon` makes even the first connection wait so, for a caller whose daemon must be
there (a job process); otherwise a daemon never reached fails at once ("is it running?").
"""

from __future__ import annotations

import contextlib
import gc
import itertools
import mmap
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import msgspec

from client import errors, paths
from client.api.declare import ACTOR_PARAM, Api, MethodSpec
from client.audit import acting_for
from client.follow import Following
from client.protocol import CutResponse, Response, decode_response, encode, uncut

_RECV = 256 * 1024
_BIG_FRAME = 1 << 20  # a frame this long so far is read on by _read_big_line
_BIG_RECV = 1 << 20
# How long a stub keeps trying to reach a daemon it was connected to (a restart), unless
# told otherwise: minutes, so a job rides out a restart however slow.
DEFAULT_PATIENCE = 300.0
# Back-off between two connection attempts while the daemon is away.
_BACKOFF_MIN, _BACKOFF_MAX = 0.01, 0.5
# The longest timeout a socket accepts (threading.TIMEOUT_MAX bounds it on every platform).
_MAX_SOCKET_TIMEOUT = threading.TIMEOUT_MAX
# Pause between two tries of a call whose connection broke.
_RETRY_PAUSE = 0.02


class _Broken(Exception):
    """The connection failed; `sent` says whether the request may have reached the daemon."""

    def __init__(self, cause: BaseException, sent: bool) -> None:
        super().__init__(str(cause))
        self.cause = cause
        self.sent = sent


class _StubBase:
    """What sync and async stubs share: the API, the socket path, call timeouts."""

    _api: ClassVar[type[Api]]
    _daemon: ClassVar[str] = "daemon"
    _decoders: ClassVar[dict[str, msgspec.json.Decoder[Any]]]

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None,
        timeout: float,
        patience: float,
        expect_daemon: bool,
        actor: str | None,
    ) -> None:
        self.socket_path = Path(socket_path) if socket_path else self._default_path()
        # Whom this stub's audited calls say they act for, unless a call names its own
        # `actor` (docs/contracts.md#audit-log): `cli:<login>`, `rapi:<user>`, `job:<id>`.
        self.actor = actor
        self.timeout = timeout
        self.patience = patience
        self._ids = itertools.count(1)
        # Whether an unreachable daemon is one restarting (wait `patience`) rather than
        # one not running at all (fail at once): true once reached, or from the start for
        # a caller whose daemon must exist (a job process, started by luxid).
        self._was_connected = expect_daemon

    @classmethod
    def _default_path(cls) -> Path:
        return paths.run_dir() / f"{cls._daemon}.sock"

    @classmethod
    def _bind_api(cls, api: type[Api], make: Callable[[MethodSpec], Callable[..., Any]]) -> None:
        cls._api = api
        cls._decoders = {}
        for name, spec in api.methods().items():
            cls._decoders[name] = msgspec.json.Decoder(spec.result_type)
            method = make(spec)
            method.__name__ = name
            method.__qualname__ = f"{cls.__name__}.{name}"
            method.__doc__ = spec.doc
            setattr(cls, name, method)

    def _params(
        self, spec: MethodSpec, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> dict[str, Any]:
        """A call's params by name; an audited method's call that names no actor acts
        for whom the code acts for (client.audit.acting_for), else for the stub's own."""
        params = spec.encode_params(args, kwargs)
        if spec.audited and params.get(ACTOR_PARAM) is None:
            actor = acting_for() or self.actor
            if actor is not None:
                params[ACTOR_PARAM] = actor
        return params

    def _call_timeout(self, spec: MethodSpec, params: dict[str, Any]) -> float | None:
        """The stub timeout, stretched by the call's own `timeout` param (None: forever)."""
        if "timeout" in spec.param_names:
            own = params.get("timeout", spec.defaults.get("timeout"))
            if own is None:
                return None
            total = self.timeout + max(0.0, float(own))
            # Beyond what a socket timeout can hold, waiting "forever" is the same answer.
            return total if total < _MAX_SOCKET_TIMEOUT else None
        return self.timeout

    def _request(self, spec: MethodSpec, params: dict[str, Any]) -> tuple[int, bytes]:
        request_id = next(self._ids)
        frame = encode({"jsonrpc": "2.0", "method": spec.name, "params": params, "id": request_id})
        return request_id, frame

    def _result(self, spec: MethodSpec, response: Response) -> Any:
        if response.error is not None:
            err = response.error
            raise errors.from_wire({"code": err.code, "message": err.message, "data": err.data})
        try:
            return _decode(self._decoders[spec.name], response.result)
        except msgspec.DecodeError:
            if not isinstance(response, CutResponse):
                raise
            return self._result(spec, uncut(response))  # not laid out as the daemons do

    def _retry_deadline(self, spec: MethodSpec, broken: _Broken, deadline: float | None) -> float:
        """Until when a call whose connection broke may be retried; raises if it may not.

        A request that never reached the daemon is always safe to send again; one that
        did only if its declaration says `reissue`.  Retries stop after `patience`.
        """
        if broken.sent and not spec.options.reissue:
            raise errors.ConnectionError(
                f"{spec.name}: the connection to {self._daemon} at {self.socket_path} broke "
                f"before the answer ({broken.cause}); it may or may not have been applied, "
                "so it is not sent again: check, then retry"
            ) from None
        now = time.monotonic()
        if deadline is None:
            deadline = now + self.patience
        if now > deadline:
            raise self._unreachable(broken.cause, self.patience) from None
        return deadline

    def _connect_deadline(self) -> float:
        """Until when to try connecting: at once for a first connection (is the daemon
        there at all?), `patience` once the daemon has been reached (a restart)."""
        return time.monotonic() + (self.patience if self._was_connected else 0.0)

    def _unreachable(self, cause: BaseException, waited: float = 0.0) -> errors.ConnectionError:
        after = f" after waiting {waited:.0f} s" if waited else ""
        return errors.ConnectionError(
            f"cannot reach {self._daemon} at {self.socket_path}{after}: {cause}; is it "
            f"running? (start it with `lw up`, `lw-{self._daemon}` or "
            f"`systemctl start lockwarden-{self._daemon}`)",
            {"daemon": self._daemon, "waited": round(waited, 3)},
        )

    def _identify_params(self) -> dict[str, Any] | None:
        """Params of the identify call made on every new connection (None: no identify)."""
        return None


class SyncStub(_StubBase):
    """Blocking stub: one call at a time over one connection."""

    def __init_subclass__(cls, api: type[Api] | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if api is not None:
            cls._bind_api(api, _sync_method)

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
        self._sock: socket.socket | None = None
        self._buf = bytearray()
        # Every recv lands here first: an anonymous mapping, whose pages cost nothing
        # until written (a bytearray would zero, and so fault in, all 64 of them); private,
        # so a forked child's receives never land in its parent's.
        self._chunk = memoryview(mmap.mmap(-1, _RECV, flags=mmap.MAP_PRIVATE))
        # Frames over _BIG_FRAME are received here, kept while the stub is open (see
        # _read_big_line); created at the first such frame.
        self._big: mmap.mmap | None = None
        self._pid = os.getpid()

    def close(self) -> None:
        """Close the connection (the next call opens a new one)."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
        self._sock = None
        self._buf.clear()
        self._big = None

    def __enter__(self) -> SyncStub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self.close()

    def _connect(self) -> None:
        started = time.monotonic()
        deadline = self._connect_deadline()
        delay = _BACKOFF_MIN
        while True:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                sock.settimeout(self.timeout)
                sock.connect(str(self.socket_path))
                break
            except OSError as exc:
                sock.close()
                left = deadline - time.monotonic()
                if left <= 0:
                    raise self._unreachable(exc, time.monotonic() - started) from None
                time.sleep(min(delay, left))
                delay = min(delay * 2, _BACKOFF_MAX)
        self._sock = sock
        self._buf.clear()
        self._was_connected = True
        ident = self._identify_params()
        if ident is not None:
            spec = self._api.methods()["identify"]
            try:
                response = self._exchange(spec, ident, self.timeout)
            except _Broken as broken:
                raise _Broken(broken.cause, sent=False) from None
            self._on_identified(self._result(spec, response))

    def _on_identified(self, result: Any) -> None:
        """Hook for stubs that identify: keep what identify answered."""

    def _exchange(
        self, spec: MethodSpec, params: dict[str, Any], timeout: float | None
    ) -> Response:
        request_id, frame = self._request(spec, params)
        sock = self._sock
        assert sock is not None
        try:
            if sock.gettimeout() != timeout:  # settimeout() is a system call; this is not
                sock.settimeout(timeout)
            _send(sock, frame)
        except OSError as exc:
            raise _Broken(exc, sent=False) from None
        try:
            while True:
                response = decode_response(self._read_line(sock))
                if response.id == request_id:
                    return response
        except TimeoutError:
            self.close()
            raise errors.Timeout(
                f"{spec.name}: no answer from {self.socket_path} within {timeout} s"
            ) from None
        except (OSError, EOFError, msgspec.DecodeError) as exc:
            raise _Broken(exc, sent=True) from None

    def _read_line(self, sock: socket.socket) -> bytes | memoryview:
        """The next frame without its newline.  A frame over _BIG_FRAME comes back as a
        view of the stub's receive mapping, valid until the next read."""
        buf = self._buf
        start = 0
        while True:
            end = buf.find(b"\n", start)
            if end >= 0:
                with memoryview(buf) as view:
                    line = bytes(view[:end])  # one copy, not two: results can be megabytes
                del buf[: end + 1]
                return line
            if len(buf) >= _BIG_FRAME:
                return self._read_big_line(sock)
            start = len(buf)
            received = sock.recv_into(self._chunk)
            if not received:
                raise EOFError("the daemon closed the connection")
            buf += self._chunk[:received]

    def _read_big_line(self, sock: socket.socket) -> memoryview:
        """The rest of a frame already longer than _BIG_FRAME, received straight into a
        mapping the stub keeps, as large as its largest frame so far.  A new buffer for each
        such frame is new memory each time (a 50 MB get_config of 100,000 instances: 12,000
        pages, each a page fault, some 3 µs apiece on a virtual machine); growing a buffer
        and copying the line out of it would pass over it twice more."""
        have = len(self._buf)
        big = self._room(have + _BIG_RECV, 0)
        big[:have] = self._buf
        self._buf.clear()
        while True:
            if len(big) - have < _BIG_RECV:
                big = self._room(2 * len(big), have)
            with memoryview(big) as view, view[have : have + _BIG_RECV] as room:
                received = sock.recv_into(room)
            if not received:
                raise EOFError("the daemon closed the connection")
            end = big.find(b"\n", have, have + received)
            have += received
            if end >= 0:
                self._buf += big[end + 1 : have]
                return memoryview(big)[:end]

    def _room(self, size: int, keep: int) -> mmap.mmap:
        """The receive mapping, at least `size` bytes, with its first `keep` bytes kept.  A
        view handed out before stays valid: the old mapping lives while it is referenced."""
        if self._big is None or len(self._big) < size:
            grown = mmap.mmap(-1, max(size, 4 * _BIG_RECV), flags=mmap.MAP_PRIVATE)
            if self._big is not None:
                grown[:keep] = self._big[:keep]
            self._big = grown
        return self._big

    def _invoke(self, spec: MethodSpec, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        params = self._params(spec, args, kwargs)
        timeout = self._call_timeout(spec, params)
        if os.getpid() != self._pid:  # forked: the connection and identity are the parent's
            self._sock = None
            self._buf.clear()
            self._pid = os.getpid()
        deadline: float | None = None
        while True:
            try:
                if self._sock is None:
                    self._connect()
                return self._result(spec, self._exchange(spec, params, timeout))
            except _Broken as broken:
                self.close()
                deadline = self._retry_deadline(spec, broken, deadline)
                time.sleep(_RETRY_PAUSE)


def _send(sock: socket.socket, frame: bytes) -> None:
    """Send a whole frame: straight to the descriptor first (a socket with a timeout is
    non-blocking underneath, and its own send() would first poll() for room, a system
    call wasted on an almost empty buffer), the rest, if the buffer is full, by sendall."""
    try:
        done = os.write(sock.fileno(), frame)
    except BlockingIOError:
        done = 0
    if done < len(frame):
        sock.sendall(frame[done:])


# Results larger than this are decoded with the cyclic garbage collector paused.
_LARGE_RESULT = 1 << 16


def _decode(decoder: msgspec.json.Decoder[Any], raw: msgspec.Raw) -> Any:
    """Decode a result; a large one (get_config of 10,000 instances: a quarter of a million
    new containers) with the garbage collector paused, whose collections, triggered by the
    allocations alone, cannot free any of them and cost a third of the decode.

    Paused is not enough: the allocations still count, so the caller's first container
    after the call set off a collection of the youngest generation that walked the whole
    result and freed nothing (87 ms after a get_config of 100,000 instances, 6.5 ms at
    10,000).  So the tracked objects are moved into the oldest generation instead
    (`gc.freeze` then `gc.unfreeze`: two list splices, and the count starts again at
    zero), where only full collections, which run rarely, walk them.  The caller's own
    young cyclic garbage then waits for the next full collection too.  Not done while any
    objects are frozen (the caller's, as before forking, or those Python 3.12 freezes as
    it starts): unfreezing would thaw them."""
    if len(raw) < _LARGE_RESULT or not gc.isenabled():
        return decoder.decode(raw)
    gc.disable()
    try:
        result = decoder.decode(raw)
        if gc.get_freeze_count() == 0:
            gc.freeze()
            gc.unfreeze()
        return result
    finally:
        gc.enable()


def _sync_method(spec: MethodSpec) -> Callable[..., Any]:
    if spec.options.pushes:

        def follow(self: SyncStub, *args: Any, **kwargs: Any) -> Following:
            return Following(self, spec, self._params(spec, args, kwargs))

        return follow

    def call(self: SyncStub, *args: Any, **kwargs: Any) -> Any:
        return self._invoke(spec, args, kwargs)

    return call
