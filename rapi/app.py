"""The aiohttp application: the route table served with authentication, JSON bodies and
Ganeti's error body `{"code", "message", "explain"}` for every failure.

No traceback ever reaches a client: daemon errors map to HTTP statuses
(`routes.RPC_STATUS`), anything unexpected is logged and answered 500.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from http import HTTPStatus
from typing import Any

import msgspec
from aiohttp import web

from client import errors, strictjson
from rapi import browser, events, openapi
from rapi.auth import REALM, Authorizer, Decision, Verdict
from rapi.routes import ROUTES, RPC_STATUS
from rapi.routing import SETTINGS, Backend, HttpError, Request, Route, Settings

log = logging.getLogger(__name__)

_encoder = msgspec.json.Encoder()
MAX_BODY_BYTES = 4 * 1024 * 1024
BACKEND: web.AppKey[Backend] = web.AppKey("backend", Backend)


def json_response(
    value: Any, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    """A JSON answer."""
    return web.Response(
        body=_encoder.encode(value), status=status, content_type="application/json", headers=headers
    )


def error_response(
    status: int, explain: str, headers: dict[str, str] | None = None
) -> web.Response:
    """Ganeti's error body."""
    try:
        message = HTTPStatus(status).phrase
    except ValueError:
        message = "Error"
    return json_response({"code": status, "message": message, "explain": explain}, status, headers)


def _rpc_status(exc: errors.RpcError) -> int:
    for cls, status in RPC_STATUS.items():
        if isinstance(exc, cls):
            return status
    return 500


@web.middleware
async def errors_middleware(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Every failure as Ganeti's error body; nothing unexpected escapes."""
    try:
        return await handler(request)
    except HttpError as exc:
        return error_response(exc.status, exc.explain, exc.headers)
    except errors.RpcError as exc:
        status = _rpc_status(exc)
        if status >= 500:
            log.error("%s %r: %r", request.method, request.path, exc.message)
        return error_response(status, exc.message)
    except web.HTTPException as exc:  # the router's 404/405, aiohttp's 413 …
        headers = {k: v for k, v in exc.headers.items() if k.lower() == "allow"}
        return error_response(exc.status, _explain(request, exc), headers)
    except Exception:
        log.exception("%s %r failed", request.method, request.path)
        return error_response(500, "internal error; the lw-rapi log has the details")


def _explain(request: web.Request, exc: web.HTTPException) -> str:
    if exc.status == 404:
        return f"no resource {request.path}; {openapi.OPENAPI_PATH} lists them"
    if exc.status == 405:
        return f"{request.method} is not allowed on {request.path} (allowed: {exc.headers.get('Allow', '')})"
    if exc.status == 413:
        return f"request body too large (at most {MAX_BODY_BYTES} bytes)"
    return exc.reason


async def _json_body(request: web.Request) -> Any:
    """The decoded JSON body; None if there is none; 400 if it is not strict JSON (a key
    twice, or nested too deeply: docs/contracts.md#framing)."""
    raw = await request.read()
    if not raw.strip():
        return None
    try:
        return strictjson.loads(raw)
    except msgspec.DecodeError as exc:
        raise HttpError(400, f"malformed JSON body: {exc}") from None
    except strictjson.JsonRefused as exc:
        raise HttpError(400, f"JSON body refused: {exc}") from None


async def authorize(authorizer: Authorizer, request: web.Request, need: str | None) -> Decision:
    """The request's access decision; HttpError 401, 403 (naming the missing role) or 429
    (with Retry-After) unless it may go on."""
    decision = await authorizer.decide(
        request.headers.get("Authorization"),
        need=need,
        what=f"{request.method} {request.path!r}",
        peer=request.remote or "?",
    )
    if decision.verdict is Verdict.UNAUTHENTICATED:
        raise HttpError(
            401,
            "authentication required: HTTP Basic with a user of the rapi_users file, or "
            "Authorization: Bearer with a token (docs/operations.md#rapi-users-roles-and-tokens)",
            {"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'},
        )
    if decision.verdict is Verdict.THROTTLED:
        raise HttpError(
            429,
            "too many failed logins for this user name or from this address; try again later",
            {"Retry-After": str(decision.retry_after)},
        )
    if decision.verdict is Verdict.FORBIDDEN:
        raise HttpError(403, f"needs role {decision.missing}")
    return decision


def _endpoint(
    route: Route, authorizer: Authorizer
) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        actor = None
        if not route.public:
            actor = (await authorize(authorizer, request, route.role)).actor
        body = await _json_body(request)
        backend = request.app[BACKEND].acting_for(actor)
        req = Request(request.match_info, request.query, body, backend, request, actor)
        result = await route.handler(req)
        if isinstance(result, web.StreamResponse):  # a stream, written by the handler
            return result
        return json_response(result)

    return handle


def make_app(backend: Backend, authorizer: Authorizer, settings: Settings) -> web.Application:
    """The RAPI application for a backend (the daemons' clients), an authorizer and
    lw-rapi's settings."""
    app = web.Application(
        middlewares=[errors_middleware, browser.guard], client_max_size=MAX_BODY_BYTES
    )
    app[BACKEND] = backend
    app[SETTINGS] = settings
    browser.install(app)
    app[events.STREAMS] = set()
    app.on_shutdown.append(events.end_streams)
    for route in ROUTES:
        app.router.add_route(route.method, route.path, _endpoint(route, authorizer))
    doc = _encoder.encode(openapi.document(ROUTES))

    async def get_openapi(request: web.Request) -> web.Response:
        return web.Response(body=doc, content_type="application/json")

    app.router.add_get(openapi.OPENAPI_PATH, get_openapi, allow_head=False)

    async def close_backend(app: web.Application) -> None:
        await app[BACKEND].close()

    app.on_cleanup.append(close_backend)
    return app
