"""Node drains over HTTP (docs/rapi-drains.md): `GET|PUT|DELETE /2/nodes/<name>/drain`,
`GET /2/nodes/<name>/drain/plan` and `GET /2/drains`, answered with luxid's `DrainStatus`
and `DrainPlan` records as they are.

luxid does the work (`drain_node`, `plan_node_drain`, `cancel_node_drain`, `query_drains`); these handlers
check the body at the edge (so a bad one is a 400 that names the parameter), find the node,
and say plainly when the luxid behind this lw-rapi predates drains: it answers
MethodNotFound, which becomes 501 Not Implemented rather than a puzzling 500.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

from client import errors
from client.api.luxi import DrainPlan, DrainStatus
from client.drains import START_AT_MAX
from client.durations import parse_duration
from client.vocabulary import INT64_MAX, PRIORITY_MAX, PRIORITY_MIN
from rapi.cluster import find_node, lookup_node
from rapi.routing import HttpError, Request, body_params, check_param, int_query

T = TypeVar("T")

DRAIN_BODY_PARAMS = ("deadline", "max_parallel", "priority", "message", "start_at")
# Job priorities, most urgent first.
PRIORITIES = range(PRIORITY_MIN, PRIORITY_MAX + 1)
MAX_INT = INT64_MAX


async def served(method: str, call: Awaitable[T]) -> T:
    """Await a drain call; 501 if luxid does not know the method (it predates drains)."""
    try:
        return await call
    except errors.MethodNotFound:
        raise HttpError(
            501,
            f"the luxid behind this lw-rapi does not serve drains (it answered {method} with "
            "MethodNotFound); node drains need an lw-luxid that serves them: upgrade and "
            "restart it",
        ) from None


async def _node_name(req: Request) -> tuple[str, bool]:
    """The {name} path parameter as a node name (a uuid is resolved) and whether the node
    exists; the key as given if it does not (a drain may outlive its node)."""
    node = await lookup_node(req)
    return (str(node["name"]), True) if node is not None else (req.match["name"], False)


def _deadline(value: Any) -> float | None:
    """The body's deadline: seconds from now (a number, or a duration such as "1h30m"),
    or null for none; 400 if it is neither."""
    if value is None:
        return None
    if isinstance(value, str):
        try:
            seconds = parse_duration(value)
        except ValueError as exc:
            raise HttpError(400, f"'deadline' parameter: {exc}") from None
        except OverflowError:  # client.durations: more digits than a float holds
            raise HttpError(400, f"'deadline' parameter: {value[:20]!r}… is too long") from None
    else:
        seconds = check_param({"deadline": value}, "deadline", (int, float), None)
    if not 0 <= seconds <= MAX_INT:  # NaN fails this too
        raise HttpError(
            400,
            f"'deadline' parameter must be 0 (now) to {MAX_INT} seconds from now, got {value!r}",
        )
    return float(seconds)


def _start_at(value: Any) -> float | None:
    """The body's start_at: seconds since the epoch (a scheduled drain), or null for now;
    400 if it is neither."""
    if value is None:
        return None
    seconds = check_param({"start_at": value}, "start_at", (int, float), None)
    if not 0 <= seconds <= START_AT_MAX:  # NaN fails this too
        raise HttpError(
            400,
            f"'start_at' parameter must be a time in seconds since the epoch (0 to "
            f"{START_AT_MAX:.0f}), or null to start now; got {value!r}",
        )
    return float(seconds)


def drain_params(req: Request) -> dict[str, Any]:
    """The PUT body `{"deadline", "max_parallel", "priority", "message", "start_at"}` as
    drain_node's arguments; absent ones are left to drain_node's defaults; 400 for
    anything else."""
    data = body_params(req, DRAIN_BODY_PARAMS, "a drain")
    params: dict[str, Any] = {}
    if "deadline" in data:
        params["deadline"] = _deadline(data["deadline"])
    if "max_parallel" in data:
        params["max_parallel"] = check_param(data, "max_parallel", int, None)
        if not 1 <= params["max_parallel"] <= MAX_INT:
            raise HttpError(400, f"'max_parallel' parameter must be 1 to {MAX_INT} (moves at once)")
    if "priority" in data:
        params["priority"] = check_param(data, "priority", int, None)
        if params["priority"] not in PRIORITIES:
            raise HttpError(
                400,
                f"'priority' parameter must be {PRIORITIES.start}…{PRIORITIES.stop - 1} "
                f"(lower is more urgent), got {params['priority']}",
            )
    if "message" in data:
        params["message"] = check_param(data, "message", str, None)
    if "start_at" in data:
        params["start_at"] = _start_at(data["start_at"])
    return params


async def get_drains(req: Request) -> list[DrainStatus]:
    """Every node drain in the configuration, and the queue drain if any."""
    return await served("query_drains", req.backend.luxi.query_drains())


async def get_node_drain(req: Request) -> DrainStatus:
    """The node's drain; 404 if the node never drained (or does not exist)."""
    name, exists = await _node_name(req)
    drains = await served("query_drains", req.backend.luxi.query_drains())
    for status in drains:
        if status.target == f"node/{name}":
            return status
    if not exists:
        raise HttpError(404, f"node '{name}' not found")
    raise HttpError(
        404, f"node '{name}' has not been drained; PUT /2/nodes/{name}/drain starts a drain"
    )


async def put_node_drain(req: Request) -> DrainStatus:
    """Start the node's drain (at `start_at`, if given and ahead: scheduled), or change the
    one in progress (deadline, max_parallel, priority, message)."""
    params = drain_params(req)
    node = await find_node(req)
    return await served("drain_node", req.backend.luxi.drain_node(node=node["name"], **params))


async def get_node_drain_plan(req: Request) -> DrainPlan:
    """What a drain of the node would do now (`?max_parallel=N`, default 1): its moves, the
    instances that cannot move, the budgets that pace it, the waves; changes nothing."""
    max_parallel = int_query(req, "max_parallel", 1)
    if not 1 <= max_parallel <= MAX_INT:
        raise HttpError(
            400,
            f"'max_parallel' parameter must be 1 to {MAX_INT} (moves at once), got {max_parallel}",
        )
    node = await find_node(req)
    return await served(
        "plan_node_drain",
        req.backend.luxi.plan_node_drain(node=node["name"], max_parallel=max_parallel),
    )


async def delete_node_drain(req: Request) -> DrainStatus:
    """Cancel the node's drain (`?keep_drained=1` leaves the node drained)."""
    keep = bool(int_query(req, "keep_drained"))
    name, _ = await _node_name(req)
    return await served(
        "cancel_node_drain", req.backend.luxi.cancel_node_drain(node=name, keep_drained=keep)
    )
