"""What every RAPI resource is made of: the `Route` record, the `Request` a handler gets,
`HttpError`, and the request helpers of Ganeti's rlib2 (query integers, bulk, bodies).

The route table itself is in `rapi.routes`; handlers are in `rapi.cluster` (cluster
objects), `rapi.jobs` (jobs and filters), `rapi.nodeops` (Ganeti's node role and
evacuation), `rapi.instanceops` (Ganeti's instance operations) and `rapi.drains` (node
drains); schemas in `rapi.schemas`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

from aiohttp import web

from client import AsyncLuxiClient, AsyncWConfdClient
from client.api.declare import ACTOR_PARAM, Api
from client.api.luxi import LuxiApi
from client.api.wconfd import WConfdApi
from client.vocabulary import INT64_MAX

MAX_JOB_ID = INT64_MAX


class HttpError(Exception):
    """An HTTP error answer with Ganeti's body `{"code", "message", "explain"}`."""

    def __init__(
        self, status: int, explain: str = "", headers: Mapping[str, str] | None = None
    ) -> None:
        super().__init__(explain)
        self.status = status
        self.explain = explain
        self.headers = dict(headers or {})


@dataclass
class Backend:
    """The daemons rapi talks to (through the async stubs only)."""

    luxi: AsyncLuxiClient
    wconfd: AsyncWConfdClient

    async def close(self) -> None:
        """Close both connections."""
        await self.luxi.close()
        await self.wconfd.close()

    def acting_for(self, actor: str | None) -> Backend:
        """The same connections, seen by one request: every audited call names `actor`
        (`rapi:alice`, `rapi:alice/token:ID`; docs/contracts.md#audit-log) unless it names
        its own.  Anonymous (None): the calls as they are."""
        if actor is None:
            return self
        return Backend(
            luxi=cast(AsyncLuxiClient, _Acting(self.luxi, _LUXI_AUDITED, actor)),
            wconfd=cast(AsyncWConfdClient, _Acting(self.wconfd, _WCONFD_AUDITED, actor)),
        )


class _Acting:
    """A stub whose `audited` methods get `actor`; everything else is the stub's own.
    Made per request: the stub and its one connection are shared."""

    def __init__(self, stub: Any, audited: frozenset[str], actor: str) -> None:
        self._stub = stub
        self._audited = audited
        self._actor = actor

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._stub, name)
        if name in self._audited:
            return functools.partial(_with_actor, attr, self._actor)
        return attr


def _audited(api: type[Api]) -> frozenset[str]:
    """The names of `api`'s audited methods."""
    return frozenset(name for name, spec in api.methods().items() if spec.audited)


_LUXI_AUDITED = _audited(LuxiApi)
_WCONFD_AUDITED = _audited(WConfdApi)


def _with_actor(method: Callable[..., Any], actor: str, /, *args: Any, **kwargs: Any) -> Any:
    """`method` called with `actor` unless the call names one."""
    if kwargs.get(ACTOR_PARAM) is None:
        kwargs[ACTOR_PARAM] = actor
    return method(*args, **kwargs)


@dataclass(frozen=True)
class Settings:
    """lw-rapi's own settings that handlers read: its state directory (the users and
    tokens files) and whether it serves plain HTTP off loopback."""

    state_dir: Path
    insecure_http: bool = False


SETTINGS: web.AppKey[Settings] = web.AppKey("settings", Settings)


@dataclass(frozen=True)
class Request:
    """What a handler gets: path parameters, query arguments, decoded JSON body, and the
    HTTP server's own request (`raw`, for the handlers that stream or read the app's
    settings), and who acts (`actor`, `rapi:alice` or `rapi:alice/token:ID`; None when
    anonymous)."""

    match: Mapping[str, str]
    query: Mapping[str, str]
    body: Any
    backend: Backend
    raw: Any = None
    actor: str | None = None

    @property
    def settings(self) -> Settings:
        """lw-rapi's settings (from the HTTP server's application)."""
        settings: Settings = self.raw.app[SETTINGS]
        return settings


Handler = Callable[[Request], Awaitable[Any]]


@dataclass(frozen=True)
class Param:
    """A path or query parameter, for the OpenAPI document."""

    name: str
    where: str  # "path" or "query"
    schema: dict[str, Any]
    description: str


@dataclass(frozen=True)
class Route:
    """One method on one resource."""

    method: str
    path: str
    handler: Handler
    summary: str
    # The role a request needs (docs/operations.md#rapi-users-roles-and-tokens): None for
    # reads, which every valid user may make; else the narrowest role that grants it.
    role: str | None = None
    public: bool = False
    params: tuple[Param, ...] = ()
    body: dict[str, Any] | None = None
    response: dict[str, Any] = field(default_factory=dict)
    errors: tuple[int, ...] = ()
    media_type: str = "application/json"  # of the answer (a stream: text/event-stream)


# -- request helpers ---------------------------------------------------------------------------


def int_query(req: Request, name: str, default: int = 0) -> int:
    """An integer query argument (Ganeti's _checkIntVariable); 400 if not an integer."""
    value = req.query.get(name)
    if value is None or value == "":
        return default
    try:
        return int(value)
    except ValueError:
        raise HttpError(400, f"Invalid value for the '{name}' parameter") from None


def bulk(req: Request) -> bool:
    """Whether `?bulk=1` asks for full objects."""
    return bool(int_query(req, "bulk"))


def job_id(req: Request) -> int:
    """The {job_id} path parameter; 400 if it is not a job id."""
    text = req.match["job_id"]
    try:
        value = int(text)
    except ValueError:
        raise HttpError(400, f"job id must be a positive integer, got {text!r}") from None
    if not 0 < value <= MAX_JOB_ID:
        raise HttpError(400, f"job id must be a positive integer, got {text!r}")
    return value


def body_object(req: Request) -> dict[str, Any]:
    """The body as a JSON object (an absent body counts as {}); 400 otherwise."""
    if req.body is None:
        return {}
    if not isinstance(req.body, dict):
        raise HttpError(400, "Invalid body contents, not a dictionary")
    return req.body


def body_params(req: Request, known: tuple[str, ...], what: str) -> dict[str, Any]:
    """The body as a JSON object of `known` parameters only (rlib2's check); 400 naming an
    unknown one, and `what` does not take it."""
    data = body_object(req)
    for name in data:
        if name not in known:
            raise HttpError(
                400,
                f"Invalid body parameters: {what} doesn't support the parameter '{name}' "
                f"(known: {', '.join(known)})",
            )
    return data


def check_param(
    data: Mapping[str, Any], name: str, kind: type | tuple[type, ...], default: Any
) -> Any:
    """A body parameter of the expected JSON type (Ganeti's CheckParameter); 400 otherwise."""
    if name not in data:
        return default
    value = data[name]
    if isinstance(value, bool) and bool not in (kind if isinstance(kind, tuple) else (kind,)):
        value_ok = False
    else:
        value_ok = isinstance(value, kind)
    if not value_ok:
        expected = (
            kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        )
        raise HttpError(
            400,
            f"'{name}' parameter: Type is '{type(value).__name__}', but '{expected}' is expected",
        )
    return value


def uri_list(ids: list[Any], fmt: str, key: str) -> list[dict[str, Any]]:
    """Ganeti's BuildUriList: `[{key: id, "uri": fmt % id}]`, sorted."""
    return [{key: i, "uri": fmt % i} for i in sorted(ids)]
