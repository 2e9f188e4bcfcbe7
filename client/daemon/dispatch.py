"""From an API declaration and a daemon's implementation to jsonrpcserver dispatch.

jsonrpcserver does the dispatching (method lookup, notifications, result/error
responses) with msgspec as decoder and a Struct as the cheap envelope validator instead
of its default jsonschema check.  Every handler decodes its params with the Struct
derived from the declaration, turns typed errors into error objects whose `data.type`
is the contract, and never lets a traceback reach the wire.
"""

from __future__ import annotations

import inspect
import logging
from collections.abc import Awaitable, Callable
from typing import Any, cast

import msgspec
from jsonrpcserver import JsonRpcError, Success
from jsonrpcserver.async_dispatcher import dispatch_request
from jsonrpcserver.dispatcher import create_request, to_response
from jsonrpcserver.response import to_serializable_one
from jsonrpcserver.sentinels import NOID

from client.api.declare import Api, MethodSpec
from client.daemon.roles import STANDBY_METHODS, Role, not_master
from client.errors import BY_CODE, InternalError, InvalidRequest, RpcError
from client.protocol import Request

log = logging.getLogger(__name__)

# Called before every method with the connection and the spec; returns the caller handed
# to the method as its first argument (e.g. the identified client), or raises to refuse.
Guard = Callable[[Any, MethodSpec], Any]
Handler = Callable[..., Awaitable[Any]]


def validate_envelope(message: Any) -> Any:
    """The cheap envelope check jsonrpcserver runs instead of jsonschema."""
    msgspec.convert(message, Request, strict=True)
    return message


def _error(exc: RpcError) -> JsonRpcError:
    return JsonRpcError(exc.code, exc.message, exc.data)


def _handler(
    spec: MethodSpec, impl: Callable[..., Awaitable[Any]], guard: Guard | None, role: Role | None
) -> Handler:
    names = spec.param_names
    if role is None or spec.name in STANDBY_METHODS:
        role = None  # answered whatever the role

    async def handle(conn: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            if role is not None and not role.serving:
                raise not_master(role)
            params = spec.decode_params(args, kwargs)
            caller = conn if guard is None else guard(conn, spec)
            result = await impl(caller, *[getattr(params, n) for n in names])
        except RpcError as exc:
            raise _error(exc) from None
        except Exception:
            log.exception("internal error in %s", spec.name)
            raise _error(
                InternalError(f"internal error in {spec.name}; the daemon log has the details")
            ) from None
        return Success(result)

    # jsonrpcserver binds the params to the handler's signature on every call; a
    # precomputed signature spares it the introspection.
    handle.__signature__ = inspect.signature(handle)  # type: ignore[attr-defined]
    return handle


def build_methods(
    api: type[Api], *impls: object, guard: Guard | None = None, role: Role | None = None
) -> dict[str, Handler]:
    """The jsonrpcserver method table for the declared methods of `api`, each implemented
    on exactly one of `impls`.

    With `role`, every method but `roles.STANDBY_METHODS` answers NotMaster while the role
    is not serving (a standby, SPEC §13): the one place the role is enforced.

    Each implementation is `async def name(self, caller, <declared params>)`, where
    `caller` is what `guard` returns (the connection when there is no guard).  A method
    missing or found twice, or different parameter names, fail here, at start-up, not
    at the first call.
    """
    methods: dict[str, Handler] = {}
    names = ", ".join(type(impl).__name__ for impl in impls)
    for name, spec in api.methods().items():
        found = [impl for impl in impls if getattr(impl, name, None) is not None]
        if len(found) > 1:
            owners = ", ".join(type(impl).__name__ for impl in found)
            raise TypeError(f"{name}() is implemented by several objects: {owners}")
        func = getattr(found[0], name) if found else None
        if func is None or not inspect.iscoroutinefunction(func):
            raise TypeError(f"one of {names} must implement async {name}()")
        got = tuple(inspect.signature(func).parameters)[1:]
        if got != spec.param_names:
            raise TypeError(
                f"{type(found[0]).__name__}.{name} takes {got}, the API declares {spec.param_names}"
            )
        methods[name] = _handler(spec, func, guard, role)
    return methods


def _serialize(response: Any) -> dict[str, Any]:
    """jsonrpcserver's response as a dict, with `data.type` on the errors it makes itself."""
    out = cast(dict[str, Any], to_serializable_one(response))
    error = out.get("error")
    if error is not None and not (isinstance(error.get("data"), dict) and "type" in error["data"]):
        cls = BY_CODE.get(error["code"], InternalError)
        detail = error.get("data")
        message = error.get("message", "")
        if cls.__name__ == "MethodNotFound":
            message = f"method not found: {detail}; see the API reference for method names"
        elif cls is InvalidRequest:
            message = "invalid request: not a JSON-RPC 2.0 request object"
        elif cls is InternalError:
            log.error("dispatch failure: %s", detail)
            message = "internal error; the daemon log has the details"
        error["message"] = message
        error["data"] = {"type": cls.__name__}
        error["code"] = cls.code
    return out


async def dispatch_one(
    message: Any, methods: dict[str, Handler], conn: Any
) -> dict[str, Any] | None:
    """Answer one request (a batch member or a lone request); None for a notification.

    jsonrpcserver's request pipeline (method lookup, param binding, the call, the
    response) runs per request; its batch helper is not used because a batch member
    that is not a valid request must get its own error (SPEC §3).
    """
    try:
        validate_envelope(message)
    except (msgspec.ValidationError, TypeError):
        request_id = message.get("id") if isinstance(message, dict) else None
        if not isinstance(request_id, int | str):
            request_id = None
        exc = InvalidRequest("invalid request: not a JSON-RPC 2.0 request object")
        return {"jsonrpc": "2.0", "error": exc.to_wire(), "id": request_id}
    request, result = await dispatch_request(methods, conn, create_request(message))
    if request.id is NOID:
        return None
    return _serialize(to_response(request, result))
