"""The RAPI resources (SPEC §8.2) in Ganeti's shapes (Ganeti's lib/rapi/rlib2.py).

Every resource is one `Route` in `ROUTES`: method, path, access, the handler and the
schemas of its parameters, body and answer.  The HTTP application (`rapi.app`) and the
OpenAPI document (`rapi.openapi`) are both derived from this one table.

Shapes: lists are `[{"id"|"uuid", "uri"}]`; `?bulk=1` lists and single resources are full
objects; job resources carry Ganeti's job field names (J_FIELDS of rlib2); filter rules
Ganeti's FILTER_RULE_FIELDS.  Handlers return plain JSON values; failures are `HttpError`
or `client.errors` exceptions, which the application turns into Ganeti's error body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from client import AsyncLuxiClient, AsyncWConfdClient, __version__, errors
from client.configview import ConfigView

RAPI_VERSION = 2
# Ganeti's /2/jobs/[id]/wait gives a job up to 10 s to change before answering null.
WAIT_TIMEOUT = 10.0
MAX_JOB_ID = 2**63 - 1

# rlib2's field lists (job fields are luxid's query_jobs fields); Lockwarden adds priority
# and pending_reason to the job resources.
_GANETI_J_FIELDS_BULK = [
    "id",
    "ops",
    "status",
    "summary",
    "opstatus",
    "received_ts",
    "start_ts",
    "end_ts",
]
J_FIELDS_BULK = [*_GANETI_J_FIELDS_BULK, "priority", "pending_reason"]
J_FIELDS = [*_GANETI_J_FIELDS_BULK, "oplog", "opresult", "priority", "pending_reason"]
FILTER_RULE_FIELDS = ["watermark", "priority", "predicates", "action", "reason_trail", "uuid"]
FILTER_BODY_PARAMS = ("priority", "predicates", "action", "reason")


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


@dataclass(frozen=True)
class Request:
    """What a handler gets: path parameters, query arguments, decoded JSON body."""

    match: Mapping[str, str]
    query: Mapping[str, str]
    body: Any
    backend: Backend


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
    write: bool = False
    public: bool = False
    params: tuple[Param, ...] = ()
    body: dict[str, Any] | None = None
    response: dict[str, Any] = field(default_factory=dict)
    errors: tuple[int, ...] = ()


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


# -- cluster objects ---------------------------------------------------------------------------


def _node_role(node: Mapping[str, Any]) -> str:
    """Ganeti's node role letter: O offline, D drained, C candidate, R regular."""
    if node.get("offline"):
        return "O"
    if node.get("drained"):
        return "D"
    if node.get("master_candidate"):
        return "C"
    return "R"


def node_resource(view: ConfigView, node: Mapping[str, Any]) -> dict[str, Any]:
    """A node in rlib2's N_FIELDS names (those that apply), plus its group's name."""
    primary = view.primary_instances(node)
    secondary = view.secondary_instances(node)
    return {
        "name": node["name"],
        "uuid": node["uuid"],
        "offline": node.get("offline", False),
        "drained": node.get("drained", False),
        "master_candidate": node.get("master_candidate", False),
        "vm_capable": node.get("vm_capable", True),
        "master_capable": True,
        "role": _node_role(node),
        "pip": node.get("primary_ip"),
        "sip": node.get("primary_ip"),
        "group.uuid": node.get("group"),
        "group": view.group_name(node.get("group")),
        "pinst_cnt": len(primary),
        "pinst_list": primary,
        "sinst_cnt": len(secondary),
        "sinst_list": secondary,
        "serial_no": node.get("serial_no"),
        "ctime": node.get("ctime"),
        "mtime": node.get("mtime"),
        "tags": node.get("tags", []),
    }


def instance_resource(view: ConfigView, inst: Mapping[str, Any]) -> dict[str, Any]:
    """An instance in rlib2's I_FIELDS names (those that apply)."""
    disks = inst.get("disks", [])
    nics = inst.get("nics", [])
    memory, vcpus = inst.get("memory"), inst.get("vcpus")
    return {
        "name": inst["name"],
        "uuid": inst["uuid"],
        "admin_state": inst.get("admin_state"),
        "pnode": view.node_name(inst.get("primary_node")),
        "snodes": [view.node_name(u) for u in inst.get("secondary_nodes", [])],
        "beparams": {"memory": memory, "maxmem": memory, "minmem": memory, "vcpus": vcpus},
        "disk.sizes": [d.get("size") for d in disks],
        "disk.uuids": [d.get("uuid") for d in disks],
        "disk_usage": sum(int(d.get("size") or 0) for d in disks),
        "nic.macs": [n.get("mac") for n in nics],
        "nic.ips": [n.get("ip") for n in nics],
        "nic.networks": [n.get("network") for n in nics],
        "serial_no": inst.get("serial_no"),
        "ctime": inst.get("ctime"),
        "mtime": inst.get("mtime"),
        "tags": inst.get("tags", []),
    }


def _found(view: ConfigView, kind: str, key: str, label: str) -> Mapping[str, Any]:
    obj = view.find(kind, key)
    if obj is None:
        raise HttpError(404, f"{label} '{key}' not found")
    return obj


# -- handlers ----------------------------------------------------------------------------------


async def get_version(req: Request) -> int:
    """The remote API version (2)."""
    return RAPI_VERSION


async def get_features(req: Request) -> list[str]:
    """Optional RAPI features (none of Ganeti's apply)."""
    return []


async def get_info(req: Request) -> dict[str, Any]:
    """Cluster information plus the queue at a glance."""
    cluster = await req.backend.wconfd.get_object(kind="cluster")
    queue = await req.backend.luxi.query_queue_info()
    return {
        "name": cluster.get("name"),
        "uuid": cluster.get("uuid"),
        "software_version": __version__,
        "protocol_version": 1,
        "max_running_jobs": cluster.get("max_running_jobs"),
        "mac_prefix": cluster.get("mac_prefix"),
        "lock_enforcement": cluster.get("lock_enforcement"),
        "serial_no": cluster.get("serial_no"),
        "ctime": cluster.get("ctime"),
        "mtime": cluster.get("mtime"),
        "tags": cluster.get("tags", []),
        "queue": {
            "drained": queue.drained,
            "running": queue.running,
            "counts": queue.counts,
            "filters": queue.filters,
        },
    }


async def _view(req: Request) -> ConfigView:
    return ConfigView(await req.backend.wconfd.get_config())


async def get_nodes(req: Request) -> list[dict[str, Any]]:
    """Node names and URIs, or (bulk) the nodes."""
    want_bulk = bulk(req)
    view = await _view(req)
    nodes = view.objects("nodes")
    if want_bulk:
        return [node_resource(view, n) for n in nodes]
    return uri_list([n["name"] for n in nodes], "/2/nodes/%s", "id")


async def get_node(req: Request) -> dict[str, Any]:
    """One node by name (or uuid)."""
    view = await _view(req)
    return node_resource(view, _found(view, "nodes", req.match["name"], "node"))


async def get_instances(req: Request) -> list[dict[str, Any]]:
    """Instance names and URIs, or (bulk) the instances."""
    want_bulk = bulk(req)
    view = await _view(req)
    instances = view.objects("instances")
    if want_bulk:
        return [instance_resource(view, i) for i in instances]
    return uri_list([i["name"] for i in instances], "/2/instances/%s", "id")


async def get_instance(req: Request) -> dict[str, Any]:
    """One instance by name (or uuid)."""
    view = await _view(req)
    return instance_resource(view, _found(view, "instances", req.match["name"], "instance"))


async def get_jobs(req: Request) -> list[dict[str, Any]]:
    """Job ids and URIs, or (bulk) the jobs; archived jobs are left out."""
    if bulk(req):
        rows = await req.backend.luxi.query_jobs(ids=None, fields=J_FIELDS_BULK)
        return [dict(zip(J_FIELDS_BULK, row, strict=True)) for row in rows if row is not None]
    rows = await req.backend.luxi.query_jobs(ids=None, fields=["id"])
    return uri_list([row[0] for row in rows if row is not None], "/2/jobs/%s", "id")


async def get_job(req: Request) -> dict[str, Any]:
    """One job with Ganeti's job fields."""
    ident = job_id(req)
    rows = await req.backend.luxi.query_jobs(ids=[ident], fields=J_FIELDS)
    if not rows or rows[0] is None:
        raise HttpError(404, f"job {ident} not found")
    return dict(zip(J_FIELDS, rows[0], strict=True))


async def delete_job(req: Request) -> list[Any]:
    """Cancel a job: `[success, message]` (`?kill=1` SIGKILLs a running job)."""
    ok, message = await req.backend.luxi.cancel_job(
        job_id=job_id(req), kill=bool(int_query(req, "kill"))
    )
    return [ok, message]


async def wait_job(req: Request) -> dict[str, Any] | None:
    """Ganeti's WaitForJobChange: a GET whose JSON body holds `fields`,
    `previous_job_info` and `previous_log_serial`; null if nothing changed in 10 s."""
    ident = job_id(req)
    body = body_object(req)
    if "fields" not in body:
        raise HttpError(400, "Required parameter 'fields' is missing")
    fields = body["fields"]
    previous = body.get("previous_job_info")
    serial = body.get("previous_log_serial")
    if not isinstance(fields, list) or not all(isinstance(f, str) for f in fields):
        raise HttpError(400, "The 'fields' parameter should be a list")
    if not (previous is None or isinstance(previous, list)):
        raise HttpError(400, "The 'previous_job_info' parameter should be a list")
    if not (serial is None or (isinstance(serial, int) and not isinstance(serial, bool))):
        raise HttpError(400, "The 'previous_log_serial' parameter should be a number")
    if serial is not None and not -MAX_JOB_ID <= serial <= MAX_JOB_ID:
        raise HttpError(400, "The 'previous_log_serial' parameter is out of range")
    change = await req.backend.luxi.wait_for_job_change(
        job_id=ident,
        fields=fields,
        prev_values=previous,
        prev_log_serial=serial,
        timeout=WAIT_TIMEOUT,
    )
    if isinstance(change, str):
        return None
    return {"job_info": change.values, "log_entries": [list(entry) for entry in change.log]}


def filter_params(req: Request) -> tuple[int, list[Any], Any, list[Any]]:
    """rlib2's checkFilterParameters: priority, predicates, action, reason (with defaults)."""
    data = body_object(req)
    for name in data:
        if name not in FILTER_BODY_PARAMS:
            raise HttpError(
                400, f"Invalid body parameters: filter rule doesn't support the parameter '{name}'"
            )
    priority = check_param(data, "priority", int, 0)
    predicates = check_param(data, "predicates", list, [])
    action = check_param(data, "action", (str, list), "CONTINUE")
    reason = check_param(data, "reason", list, [])
    if not -MAX_JOB_ID <= priority <= MAX_JOB_ID:
        raise HttpError(400, "'priority' parameter is out of range")
    return priority, predicates, action, reason


async def get_filters(req: Request) -> list[dict[str, Any]]:
    """Filter uuids and URIs, or (bulk) the filter rules."""
    if bulk(req):
        rows = await req.backend.luxi.query_filters(uuids=None, fields=FILTER_RULE_FIELDS)
        return [dict(zip(FILTER_RULE_FIELDS, row, strict=True)) for row in rows]
    rows = await req.backend.luxi.query_filters(uuids=None, fields=["uuid"])
    return uri_list([row[0] for row in rows], "/2/filters/%s", "uuid")


async def add_filter(req: Request) -> str:
    """Add a filter rule; its uuid."""
    priority, predicates, action, reason = filter_params(req)
    uuid: str = await req.backend.luxi.replace_filter(
        uuid=None, priority=priority, predicates=predicates, action=action, reason=reason
    )
    return uuid


async def get_filter(req: Request) -> dict[str, Any]:
    """One filter rule."""
    uuid = req.match["uuid"]
    rows = await req.backend.luxi.query_filters(uuids=[uuid], fields=FILTER_RULE_FIELDS)
    if not rows:
        raise HttpError(404, f"filter rule {uuid} not found")
    return dict(zip(FILTER_RULE_FIELDS, rows[0], strict=True))


async def replace_filter(req: Request) -> str:
    """Replace a filter rule, or create it under this uuid; its uuid."""
    priority, predicates, action, reason = filter_params(req)
    uuid: str = await req.backend.luxi.replace_filter(
        uuid=req.match["uuid"],
        priority=priority,
        predicates=predicates,
        action=action,
        reason=reason,
    )
    return uuid


async def delete_filter(req: Request) -> None:
    """Delete a filter rule."""
    await req.backend.luxi.delete_filter(uuid=req.match["uuid"])


# -- schemas (for the OpenAPI document) --------------------------------------------------------

_ANY: dict[str, Any] = {}
_STR = {"type": "string"}
_INT = {"type": "integer"}
_NUM_OR_NULL = {"type": ["number", "null"]}
_STR_LIST = {"type": "array", "items": _STR}
_LIST = {"type": "array"}


def _obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required is not None:
        out["required"] = required
    return out


def _ref(name: str) -> dict[str, Any]:
    return {"$ref": f"#/components/schemas/{name}"}


SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": _obj({"code": _INT, "message": _STR, "explain": _STR}, ["code", "message", "explain"]),
    "IdUri": _obj({"id": {"type": ["string", "integer"]}, "uri": _STR}, ["id", "uri"]),
    "UuidUri": _obj({"uuid": _STR, "uri": _STR}, ["uuid", "uri"]),
    "Info": _obj(
        {
            "name": _STR,
            "uuid": _STR,
            "software_version": _STR,
            "protocol_version": _INT,
            "max_running_jobs": _INT,
            "tags": _STR_LIST,
            "queue": {"type": "object"},
        },
        ["name", "uuid", "software_version"],
    ),
    "Node": _obj(
        {
            "name": _STR,
            "uuid": _STR,
            "offline": {"type": "boolean"},
            "drained": {"type": "boolean"},
            "master_candidate": {"type": "boolean"},
            "role": {"type": "string", "enum": ["O", "D", "C", "R"]},
            "pip": {"type": ["string", "null"]},
            "group.uuid": _STR,
            "pinst_cnt": _INT,
            "pinst_list": _STR_LIST,
            "tags": _STR_LIST,
        },
        ["name", "uuid", "role"],
    ),
    "Instance": _obj(
        {
            "name": _STR,
            "uuid": _STR,
            "admin_state": {"type": "string", "enum": ["up", "down", "offline"]},
            "pnode": _STR,
            "snodes": _STR_LIST,
            "beparams": {"type": "object"},
            "disk.sizes": {"type": "array", "items": _INT},
            "nic.macs": {"type": "array"},
            "tags": _STR_LIST,
        },
        ["name", "uuid", "pnode"],
    ),
    "Job": _obj(
        {
            "id": _INT,
            "status": {
                "type": "string",
                "enum": [
                    "queued",
                    "waiting",
                    "running",
                    "canceling",
                    "canceled",
                    "success",
                    "error",
                ],
            },
            "ops": {"type": "array", "items": {"type": "object"}},
            "summary": _STR_LIST,
            "opstatus": _STR_LIST,
            "received_ts": _NUM_OR_NULL,
            "start_ts": _NUM_OR_NULL,
            "end_ts": _NUM_OR_NULL,
            "oplog": _LIST,
            "opresult": _LIST,
            "priority": _INT,
            "pending_reason": {"type": ["string", "null"]},
        },
        ["id", "status", "ops", "summary", "opstatus"],
    ),
    "Filter": _obj(
        {
            "uuid": _STR,
            "watermark": _INT,
            "priority": _INT,
            "predicates": _LIST,
            "action": {"oneOf": [_STR, _LIST]},
            "reason_trail": _LIST,
        },
        FILTER_RULE_FIELDS,
    ),
    "FilterBody": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "priority": {"type": "integer", "minimum": 0},
            "predicates": {"type": "array", "items": {"type": "array"}},
            "action": {
                "oneOf": [
                    {"type": "string", "enum": ["ACCEPT", "PAUSE", "REJECT", "CONTINUE"]},
                    {
                        "type": "array",
                        "prefixItems": [{"const": "RATE_LIMIT"}, {"type": "integer", "minimum": 1}],
                        "minItems": 2,
                        "maxItems": 2,
                    },
                ]
            },
            "reason": {
                "type": "array",
                "items": {
                    "type": "array",
                    "prefixItems": [_STR, _STR, _INT],
                    "minItems": 3,
                    "maxItems": 3,
                },
            },
        },
    },
    "WaitBody": {
        "type": "object",
        "required": ["fields"],
        "properties": {
            "fields": {"type": "array", "items": {"type": "string", "enum": J_FIELDS}},
            "previous_job_info": {"type": ["array", "null"]},
            "previous_log_serial": {"type": ["integer", "null"]},
        },
    },
    "JobChange": {
        "oneOf": [
            {"type": "null"},
            _obj({"job_info": _LIST, "log_entries": _LIST}, ["job_info", "log_entries"]),
        ]
    },
}

_BULK = Param("bulk", "query", {"type": "integer", "enum": [0, 1]}, "1 for full objects")
_JOB_ID = Param("job_id", "path", {"type": "integer", "minimum": 1}, "job id")
_UUID = Param("uuid", "path", {"type": "string", "format": "uuid"}, "filter rule uuid")
_NAME = Param("name", "path", {"type": "string"}, "name (or uuid)")


def _list_of(ref: str, bulk_ref: str) -> dict[str, Any]:
    return {"type": "array", "items": {"oneOf": [_ref(ref), _ref(bulk_ref)]}}


ROUTES: tuple[Route, ...] = (
    Route("GET", "/version", get_version, "the remote API version (2)", public=True, response=_INT),
    Route("GET", "/2/features", get_features, "optional features", response=_STR_LIST),
    Route("GET", "/2/info", get_info, "cluster information", response=_ref("Info")),
    Route(
        "GET",
        "/2/nodes",
        get_nodes,
        "nodes (bulk=1: full objects)",
        params=(_BULK,),
        response=_list_of("IdUri", "Node"),
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/nodes/{name}",
        get_node,
        "one node",
        params=(_NAME,),
        response=_ref("Node"),
        errors=(404,),
    ),
    Route(
        "GET",
        "/2/instances",
        get_instances,
        "instances (bulk=1: full objects)",
        params=(_BULK,),
        response=_list_of("IdUri", "Instance"),
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/instances/{name}",
        get_instance,
        "one instance",
        params=(_NAME,),
        response=_ref("Instance"),
        errors=(404,),
    ),
    Route(
        "GET",
        "/2/jobs",
        get_jobs,
        "jobs that are not archived (bulk=1: full objects)",
        params=(_BULK,),
        response=_list_of("IdUri", "Job"),
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/jobs/{job_id}",
        get_job,
        "one job",
        params=(_JOB_ID,),
        response=_ref("Job"),
        errors=(400, 404),
    ),
    Route(
        "DELETE",
        "/2/jobs/{job_id}",
        delete_job,
        "cancel a job: [success, message]",
        write=True,
        params=(
            _JOB_ID,
            Param("kill", "query", {"type": "integer", "enum": [0, 1]}, "1: SIGKILL a running job"),
        ),
        response={"type": "array", "prefixItems": [{"type": "boolean"}, _STR]},
        errors=(400, 404),
    ),
    Route(
        "GET",
        "/2/jobs/{job_id}/wait",
        wait_job,
        "wait up to 10 s for a job to change (JSON body); null if it did not",
        params=(_JOB_ID,),
        body=_ref("WaitBody"),
        response=_ref("JobChange"),
        errors=(400, 404),
    ),
    Route(
        "GET",
        "/2/filters",
        get_filters,
        "filter rules (bulk=1: full objects)",
        params=(_BULK,),
        response={"type": "array", "items": {"oneOf": [_ref("UuidUri"), _ref("Filter")]}},
        errors=(400,),
    ),
    Route(
        "POST",
        "/2/filters",
        add_filter,
        "add a filter rule; its uuid",
        write=True,
        body=_ref("FilterBody"),
        response=_STR,
        errors=(400,),
    ),
    Route(
        "GET",
        "/2/filters/{uuid}",
        get_filter,
        "one filter rule",
        params=(_UUID,),
        response=_ref("Filter"),
        errors=(404,),
    ),
    Route(
        "PUT",
        "/2/filters/{uuid}",
        replace_filter,
        "replace (or create) a filter rule; its uuid",
        write=True,
        params=(_UUID,),
        body=_ref("FilterBody"),
        response=_STR,
        errors=(400,),
    ),
    Route(
        "DELETE",
        "/2/filters/{uuid}",
        delete_filter,
        "delete a filter rule",
        write=True,
        params=(_UUID,),
        response={"type": "null"},
        errors=(400, 404),
    ),
)

# How each typed daemon error is answered.
RPC_STATUS: dict[type[errors.RpcError], int] = {
    errors.NotFound: 404,
    errors.InvalidParams: 400,
    errors.FilterError: 400,
    errors.InvalidOpcode: 400,
    errors.ConfigValidationError: 400,
    errors.AlreadyExists: 409,
    errors.QueueDrained: 503,
    errors.ConnectionError: 502,
    errors.Timeout: 504,
}
