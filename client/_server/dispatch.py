"""From an API declaration and a daemon's implementation to JSON-RPC dispatch.

A handler returns its result or raises an `RpcError`, whose `data.type` is the contract;
anything else becomes an InternalError, so no traceback reaches the wire. Every handler
decodes its params with the Struct derived from the declaration, and a Struct is the
envelope check (msgspec, not jsonschema).

The request pipeline (method lookup, the call, the response object) is `dispatch_one`,
written here rather than taken from a JSON-RPC library: jsonrpcserver's binds the params
to the handler's signature with `inspect` and wraps every step in Either values, about
7 µs a call - a fifth of a durable lock call's CPU in wconfd (issue 11,
bench/lock_breakdown.py) - for checks our handlers make anyway.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
from collections.abc import Awaitable, Callable, Coroutine
from contextvars import ContextVar
from typing import Any

import msgspec

from client._server.audit import Auditing
from client._server.etcd.errors import Fenced
from client._server.roles import STANDBY_METHODS, Role, Superseded, settled_not_master
from client.api.declare import ACTOR_PARAM, Api, MethodSpec
from client.errors import (
    InternalError,
    InvalidParams,
    InvalidRequest,
    MethodNotFound,
    PermissionDenied,
    RpcError,
)
from client.protocol import Request

log = logging.getLogger(__name__)

# Called before every method with the connection and the spec; returns the caller handed
# to the method as its first argument (e.g. the identified client), or raises to refuse.
Guard = Callable[[Any, MethodSpec], Any]
Handler = Callable[..., Awaitable[Any]]

BIG_REQUEST: ContextVar[bool] = ContextVar("lw_big_request", default=False)
"""Set (by the server, in the call's own task) for a request read from a big frame: its
params are then checked in a thread, as the frame was decoded, so that walking millions
of values never holds up the event loop (docs/contracts.md#framing)."""


def daemons_only_refusal(spec: MethodSpec, peer_uid: int, own_uid: int) -> PermissionDenied:
    """The error of a daemons-only call from a peer that is neither the daemon's uid nor
    root (docs/contracts.md#who-may-call)."""
    return PermissionDenied(
        f"only uid {own_uid} (the daemons') or root may call {spec.name}",
        {"uid": peer_uid, "allowed": [own_uid, 0], "method": spec.name},
    )


# How many times one call may be handed to the current table's handler.
_HANDOVERS = 3


def _handler(
    spec: MethodSpec,
    impl: Callable[..., Coroutine[Any, Any, Any]],
    guard: Guard | None,
    role: Role | None,
    own_uid: int,
    auditing: Auditing | None,
) -> Handler:
    names = _impl_params(spec, impl)
    audit = auditing if spec.audited else None
    if role is None or spec.name in STANDBY_METHODS:
        role = None  # answered whatever the role
    restricted = bool(spec.options.daemons_only)

    async def handle(conn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            # The uid rule comes before anything else: a refused peer learns nothing more.
            if restricted and conn.peer.uid not in (own_uid, 0) and spec.restricted(args, kwargs):
                raise daemons_only_refusal(spec, conn.peer.uid, own_uid)
            if role is not None and not role.serving:
                refusal = await settled_not_master(role)
                if not role.serving:
                    raise refusal
                # Serving now: a node that became master meanwhile installed a table over
                # the new term's state, and this handler may be of the one before it.
                raise Superseded(refusal)
            if BIG_REQUEST.get():
                loop = asyncio.get_running_loop()
                params = await loop.run_in_executor(None, spec.decode_params, args, kwargs)
            else:
                params = spec.decode_params(args, kwargs)
            caller = conn if guard is None else guard(conn, spec)
            values = [getattr(params, n) for n in names]
            if audit is None:
                result = await impl(caller, *values)
            else:
                result = await audit.around(
                    spec.name,
                    conn,
                    caller,
                    getattr(params, ACTOR_PARAM),
                    spec.audit_target(params),
                    impl,
                    values,
                )
        except Superseded:
            raise
        except Fenced:
            if role is None:
                raise
            # A write of a term that is over (this node was deposed, perhaps while it was
            # paused): the caller is told who the master is, not of a storage failure.
            raise await settled_not_master(role) from None
        except RpcError:
            raise
        except Exception:
            log.exception("internal error in %s", spec.name)
            raise InternalError(
                f"internal error in {spec.name}; the daemon log has the details"
            ) from None
        return result

    return handle


def _impl_params(spec: MethodSpec, impl: Callable[..., Any]) -> tuple[str, ...]:
    """The declared params an implementation takes: all of them, or, for an audited
    method, all but `actor` when the implementation leaves it to the audit log."""
    got = tuple(inspect.signature(impl).parameters)[1:]
    if got == spec.param_names or (spec.audited and got == spec.param_names[:-1]):
        return got
    owner = type(getattr(impl, "__self__", impl)).__name__
    raise TypeError(f"{owner}.{spec.name} takes {got}, the API declares {spec.param_names}")


def build_methods(
    api: type[Api],
    *impls: object,
    guard: Guard | None = None,
    role: Role | None = None,
    own_uid: int | None = None,
    auditing: Auditing | None = None,
) -> dict[str, Handler]:
    """The dispatch table for the declared methods of `api`, each implemented
    on exactly one of `impls`.

    With `role`, every method but `roles.STANDBY_METHODS` answers NotMaster while the role
    is not serving (a standby): the one place the role is enforced.  Methods declared
    `daemons_only` answer PermissionDenied to a peer whose uid is neither `own_uid` (default:
    this process's effective uid) nor 0, before anything else: the one place that rule is
    enforced.  With `auditing`, every method declared `audit=` is recorded in the daemon's
    audit log before its answer (client._server.audit).

    Each implementation is `async def name(self, caller, <declared params>)`, where
    `caller` is what `guard` returns (the connection when there is no guard).  A method
    missing or found twice, or different parameter names, fail here, at start-up, not
    at the first call.
    """
    methods: dict[str, Handler] = {}
    uid = os.geteuid() if own_uid is None else own_uid
    names = ", ".join(type(impl).__name__ for impl in impls)
    for name, spec in api.methods().items():
        found = [impl for impl in impls if getattr(impl, name, None) is not None]
        if len(found) > 1:
            owners = ", ".join(type(impl).__name__ for impl in found)
            raise TypeError(f"{name}() is implemented by several objects: {owners}")
        func = getattr(found[0], name) if found else None
        if func is None or not inspect.iscoroutinefunction(func):
            raise TypeError(f"one of {names} must implement async {name}()")
        methods[name] = _handler(spec, func, guard, role, uid, auditing)
    return methods


async def dispatch_one(
    message: Any, methods: dict[str, Handler], conn: Any
) -> dict[str, Any] | None:
    """Answer one request (a batch member or a lone request); None for a notification.

    A batch member that is not a valid request gets its own error
    (docs/contracts.md#calls), so this runs per request.  Params by position or by name go
    to the handler as they came; the handler decodes them against the declaration.
    """
    try:
        request = msgspec.convert(message, Request, strict=True)
    except (msgspec.ValidationError, TypeError):
        request_id = message.get("id") if isinstance(message, dict) else None
        if not isinstance(request_id, int | str):
            request_id = None
        exc = InvalidRequest("invalid request: not a JSON-RPC 2.0 request object")
        return {"jsonrpc": "2.0", "error": exc.to_wire(), "id": request_id}
    request_id = request.id
    result: Any = None
    error: RpcError | None = None
    for _ in range(_HANDOVERS):
        handler = methods.get(request.method)
        if handler is None:
            error = MethodNotFound(
                f"method not found: {request.method}; see the API reference for method names"
            )
            break
        params = request.params
        try:
            if isinstance(params, list):
                result = await handler(conn, *params)
            else:
                result = await handler(conn, **params)
        except Superseded as superseded:  # the current table's handler answers instead
            error = superseded.refusal
            continue
        except RpcError as exc:
            error = exc
        except TypeError as exc:  # the params do not bind to the handler (`conn=` given)
            error = InvalidParams(f"{request.method}: {exc}")
        except Exception:  # handlers answer their own failures; this is a wrapper's bug
            log.exception("dispatch failure in %s", request.method)
            error = InternalError("internal error; the daemon log has the details")
        else:
            error = None
        break
    if request_id is msgspec.UNSET:
        return None
    if error is not None:
        return {"jsonrpc": "2.0", "error": error.to_wire(), "id": request_id}
    return {"jsonrpc": "2.0", "result": result, "id": request_id}
