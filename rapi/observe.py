"""lw-rapi's observability routes (docs/observability.md): `GET /metrics` and the dashboard
under `/ui/`.

`install()` adds them to the RAPI application.  They are reads: each needs a user of the
rapi_users file unless `--allow-anonymous-read`; `/metrics` alone may also be opened with
`--metrics-anonymous` (for a Prometheus server without credentials).  Refusals are the
RAPI's own (401 asking for Basic credentials, so a browser prompts; logged).
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from importlib import resources
from typing import Any

from aiohttp import web

from rapi import metrics
from rapi.app import BACKEND, authorize, json_response
from rapi.auth import Authorizer
from rapi.dashboard import live

STREAMS: web.AppKey[set[asyncio.Task[Any]]] = web.AppKey("dashboard_streams")
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
METRICS_PATH = "/metrics"
UI_PATH = "/ui/"
_STATIC = {
    "index.html": "text/html",
    "app.js": "text/javascript",
    "style.css": "text/css",
}


def add_flags(parser: argparse.ArgumentParser) -> None:
    """lw-rapi's option for anonymous scrapes."""
    parser.add_argument(
        "--metrics-anonymous",
        action="store_true",
        help=f"let clients without credentials read {METRICS_PATH} (other reads still need a "
        "user unless --allow-anonymous-read)",
    )


def _reading(authorizer: Authorizer, handler: Handler, *, anonymous: bool = False) -> Handler:
    """`handler` behind the RAPI's read check (skipped when `anonymous`)."""

    async def guarded(request: web.Request) -> web.StreamResponse:
        if not anonymous:
            await authorize(authorizer, request, None)
        return await handler(request)

    return guarded


def _static(name: str) -> Handler:
    body = resources.files("rapi.dashboard").joinpath("static", name).read_bytes()

    async def serve(request: web.Request) -> web.Response:
        return web.Response(
            body=body, content_type=_STATIC[name], headers={"Cache-Control": "no-cache"}
        )

    return serve


async def _metrics(request: web.Request) -> web.Response:
    backend = request.app[BACKEND]
    return await metrics.get_metrics(backend.luxi, backend.wconfd, request.headers.get("Accept"))


async def _state(request: web.Request) -> web.Response:
    backend = request.app[BACKEND]
    return json_response(await live.snapshot(backend.luxi, backend.wconfd))


async def _events(request: web.Request) -> web.StreamResponse:
    backend = request.app[BACKEND]
    task = asyncio.current_task()
    assert task is not None
    streams = request.app[STREAMS]
    streams.add(task)
    try:
        return await live.events(request, backend.luxi, backend.wconfd)
    finally:
        streams.discard(task)


async def _end_streams(app: web.Application) -> None:
    """On shutdown: end the open event streams (they never end by themselves), so that
    lw-rapi stops at once rather than after aiohttp's grace period."""
    streams = app[STREAMS]
    for task in list(streams):
        task.cancel()


async def _to_ui(request: web.Request) -> web.StreamResponse:
    return web.Response(status=302, headers={"Location": UI_PATH})


def install(app: web.Application, authorizer: Authorizer, *, metrics_anonymous: bool) -> None:
    """Add `/metrics` and the dashboard (`/ui/`, its files, `/ui/state`, `/ui/events`)."""
    app[STREAMS] = set()
    app.on_shutdown.append(_end_streams)
    add = app.router.add_get
    add(METRICS_PATH, _reading(authorizer, _metrics, anonymous=metrics_anonymous))
    add("/ui", _to_ui, allow_head=False)
    add(UI_PATH, _reading(authorizer, _static("index.html")))
    for name in ("app.js", "style.css"):
        add(f"{UI_PATH}{name}", _reading(authorizer, _static(name)))
    add(f"{UI_PATH}state", _reading(authorizer, _state))
    add(f"{UI_PATH}events", _reading(authorizer, _events), allow_head=False)
