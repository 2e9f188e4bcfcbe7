"""What keeps a browser from being turned against the RAPI
(docs/operations.md#browsers-and-the-rapi).

A page on another site can make a browser that holds RAPI credentials send a form
(`enctype="text/plain"`, no preflight) or a `fetch` to the RAPI.  So every write (POST,
PUT, DELETE) needs the media type `application/json`, which a form cannot send (415
otherwise), and a write whose `Origin` is not the RAPI's own (scheme and `Host`), `null`
included, is refused (403).  Both checks come before authentication.  Every answer says
`X-Content-Type-Options: nosniff`; the dashboard's also forbid inline scripts, other
origins' content and framing.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from rapi.routing import HttpError

WRITES = frozenset({"POST", "PUT", "DELETE"})
JSON = "application/json"
UI_PREFIX = "/ui"
UI_HEADERS = {"Content-Security-Policy": "default-src 'self'", "X-Frame-Options": "DENY"}


def media_type(content_type: str | None) -> str:
    """The media type of a Content-Type header, without parameters, lower case."""
    return (content_type or "").split(";", 1)[0].strip().lower()


def write_refusal(
    content_type: str | None, origin: str | None, scheme: str, host: str | None
) -> tuple[int, str] | None:
    """Why a write must be refused (status, explanation), or None to go on."""
    if media_type(content_type) != JSON:
        return 415, (
            f"a write needs Content-Type: {JSON} (got {content_type or 'none'!r}); "
            "docs/operations.md#browsers-and-the-rapi"
        )
    if origin is not None:
        own = f"{scheme}://{host}".lower() if host else None
        if origin.strip().lower().rstrip("/") != own:
            return 403, (
                f"a write from origin {origin!r} is refused: only pages of this RAPI "
                f"({own or 'unknown: no Host header'}) may write"
            )
    return None


@web.middleware
async def guard(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> web.StreamResponse:
    """Refuse writes that a foreign page could have made, before anything else."""
    if request.method in WRITES:
        refusal = write_refusal(
            request.headers.get("Content-Type"),
            request.headers.get("Origin"),
            request.scheme,
            request.headers.get("Host"),
        )
        if refusal is not None:
            raise HttpError(*refusal)
    return await handler(request)


async def add_headers(request: web.Request, response: web.StreamResponse) -> None:
    """on_response_prepare: the headers every answer carries (errors and streams too)."""
    response.headers["X-Content-Type-Options"] = "nosniff"
    if request.path == UI_PREFIX or request.path.startswith(UI_PREFIX + "/"):
        response.headers.update(UI_HEADERS)


def install(app: web.Application) -> None:
    """Add the headers to every answer of `app` (the guard is one of its middlewares)."""
    app.on_response_prepare.append(add_headers)
