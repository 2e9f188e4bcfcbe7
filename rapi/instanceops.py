"""Ganeti's instance operations over HTTP, in the shapes `ganeti.rapi.client` sends them
(rlib2's R_2_instances POST and R_2_instances_name DELETE, .../migrate, .../failover,
.../shutdown, .../startup; docs/rapi-instances.md).  Each submits one job to luxid and
answers its id, as Ganeti does, so that automation written against Ganeti's RAPI drives
Lockwarden unchanged:

- `POST /2/instances` with Ganeti's request version 1 (feature `instance-create-reqv1`,
  which makes Ganeti's client send this form at all) → OP_INSTANCE_CREATE;
- `DELETE /2/instances/<name>` → OP_INSTANCE_REMOVE;
- `PUT /2/instances/<name>/migrate` (`target_node`, `mode`) → OP_INSTANCE_MIGRATE;
- `PUT /2/instances/<name>/failover` (`target_node`) → OP_INSTANCE_FAILOVER;
- `PUT /2/instances/<name>/shutdown` → OP_INSTANCE_SHUTDOWN;
- `PUT /2/instances/<name>/startup` → OP_INSTANCE_STARTUP.

The creation body is decoded with msgspec (`CreateRequestV1`): fields Lockwarden has no use
for (`os`, `hypervisor`, what each NIC holds, `snode`, `iallocator`, `name_check` …) are
accepted and ignored, as a data plane that is simulated has nothing to do with them; what
it needs is typed, and anything else is a 400 naming what was wrong and what to send.  The
other resources take the body parameters Ganeti's client sends (rlib2's check: an unknown
one is a 400); those that guard real hypervisors and disks (`cleanup`, `ignore_consistency`,
`timeout` …) are accepted with nothing to change, except where honouring them is impossible
(`?dry-run=1`, `cleanup: true`, `?no_remember=1`), which is a 400 saying so.

An unknown instance is a 404 before any job is submitted, as `rapi.nodeops` treats an
unknown node.  Jobs carry Ganeti's reason trail (`rapi.nodeops.reason_trail`).
"""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

import msgspec
from msgspec import Meta

from client.vocabulary import INT64_MAX
from rapi.cluster import find_instance, lookup
from rapi.nodeops import refuse_dry_run, submit
from rapi.routing import HttpError, Request, body_params, check_param, int_query

REQ_DATA_VERSION: Final = "__version__"  # rlib2's _REQ_DATA_VERSION
CREATE_MODE: Final = "create"
MIGRATION_MODES: Final = ("live", "non-live")  # Ganeti's HT_MIGRATION_MODES
DEFAULT_VCPUS: Final = 1  # Ganeti's default beparams
NUMBER: Final = (int, float)
# A count or size a client sends: ≥ 1 and within JSON's 64-bit integers (docs/contracts.md#numbers).
Positive = Annotated[int, Meta(ge=1, le=INT64_MAX)]

# Body parameters each resource takes (what Ganeti's client and rlib2's opcodes know).
DELETE_PARAMS: Final = ("shutdown_timeout", "ignore_failures")
MIGRATE_PARAMS: Final = (
    "mode",
    "cleanup",
    "target_node",
    "iallocator",
    "allow_failover",
    "ignore_ipolicy",
    "allow_runtime_changes",
)
FAILOVER_PARAMS: Final = (
    "target_node",
    "iallocator",
    "ignore_consistency",
    "shutdown_timeout",
    "ignore_ipolicy",
)
SHUTDOWN_PARAMS: Final = ("timeout", "ignore_offline_nodes")
STARTUP_PARAMS: Final = ("force", "ignore_offline_nodes")

CREATE_EXAMPLE: Final = (
    '{"__version__": 1, "mode": "create", "name": "vm1", "disk_template": "sharedfile", '
    '"disks": [{"size": 10240}], "nics": [{}], "beparams": {"maxmem": 2048, "vcpus": 2}}'
)


class DiskV1(msgspec.Struct, frozen=True):
    """One disk of Ganeti's creation request: size in MiB and access mode (Ganeti's `vg`,
    `spindles`, `name` … are ignored: disks live on shared storage)."""

    size: Positive
    mode: Literal["rw", "ro"] = "rw"


class BeParamsV1(msgspec.Struct, frozen=True):
    """The backend parameters placement needs: memory in MiB (`maxmem`, or Ganeti's older
    `memory`) and `vcpus`; the others (`minmem`, `auto_balance` …) are ignored."""

    maxmem: Positive | None = None
    memory: Positive | None = None
    vcpus: Positive = DEFAULT_VCPUS


class CreateRequestV1(msgspec.Struct, frozen=True):
    """Ganeti's instance creation request, version 1 (`__version__` checked before):
    what Lockwarden uses of it, every other field ignored."""

    mode: str
    name: str
    disk_template: str
    disks: list[DiskV1]
    nics: list[dict[str, Any]]
    beparams: BeParamsV1 = BeParamsV1()
    pnode: str | None = None
    start: bool = True


def parse_create(body: Any) -> CreateRequestV1:
    """The creation request of a body; 400 saying what was wrong and what to send."""
    if not isinstance(body, dict):
        raise HttpError(400, f"Body contents: send a JSON object, such as {CREATE_EXAMPLE}")
    version = body.get(REQ_DATA_VERSION, 0)
    if version != 1 or isinstance(version, bool):
        what = "missing" if REQ_DATA_VERSION not in body else f"{version!r}"
        raise HttpError(
            400,
            f"Unsupported instance creation request data version ({REQ_DATA_VERSION} is "
            f'{what}): send Ganeti\'s version 1 body with "{REQ_DATA_VERSION}": 1 '
            f"(feature instance-create-reqv1), such as {CREATE_EXAMPLE}",
        )
    try:
        request = msgspec.convert(body, CreateRequestV1)
    except msgspec.ValidationError as exc:
        raise HttpError(
            400, f"Invalid instance creation request: {exc}; send such as {CREATE_EXAMPLE}"
        ) from None
    if request.mode != CREATE_MODE:
        raise HttpError(
            400,
            f"'mode' parameter: {request.mode!r} is not supported; send \"mode\": "
            f'"{CREATE_MODE}" (there are no exports to import from)',
        )
    if request.beparams.maxmem is None and request.beparams.memory is None:
        raise HttpError(
            400,
            "'beparams' parameter: the memory is missing; send \"beparams\": "
            '{"maxmem": MiB, "vcpus": N} (or Ganeti\'s older "memory" for "maxmem")',
        )
    return request


def create_ops(request: CreateRequestV1) -> list[dict[str, Any]]:
    """The job's opcodes: OP_INSTANCE_CREATE (placed by room without `pnode`), then
    OP_INSTANCE_SHUTDOWN when `start` is false (a new instance is created up)."""
    memory = request.beparams.maxmem or request.beparams.memory
    op: dict[str, Any] = {
        "OP_ID": "OP_INSTANCE_CREATE",
        "instance_name": request.name,
        "memory": memory,
        "vcpus": request.beparams.vcpus,
        "disks": [{"size": d.size, "mode": d.mode} for d in request.disks],
        "nics": len(request.nics),
    }
    if request.pnode is not None:
        op["pnode"] = request.pnode
    ops = [op]
    if not request.start:
        ops.append({"OP_ID": "OP_INSTANCE_SHUTDOWN", "instance_name": request.name})
    return ops


async def post_instances(req: Request) -> int:
    """Create an instance from Ganeti's version 1 request; the job id."""
    refuse_dry_run(req, "instance creation")
    request = parse_create(req.body)
    if request.pnode is not None and await lookup(req, "node", request.pnode) is None:
        raise HttpError(
            400,
            f"'pnode' parameter: node {request.pnode!r} not found; name a node of "
            "/2/nodes, or leave 'pnode' out to place the instance by room",
        )
    return await submit(req, "instances", *create_ops(request))


async def _instance_job(req: Request, resource: str, op_id: str, **params: Any) -> int:
    """Submit `op_id` on the {name} instance (404 if there is none); the job id."""
    inst = await find_instance(req)
    op = {"OP_ID": op_id, "instance_name": inst["name"], **params}
    return await submit(req, f"instances_name{resource}", op)


def target_node(data: dict[str, Any]) -> dict[str, Any]:
    """The opcode's `target_node` from a body (absent or null: placement chooses)."""
    target = check_param(data, "target_node", (str, type(None)), None)
    return {} if target is None else {"target_node": target}


async def delete_instance(req: Request) -> int:
    """Remove an instance (OP_INSTANCE_REMOVE); the job id."""
    refuse_dry_run(req, "instance removal")
    data = body_params(req, DELETE_PARAMS, "instance removal")
    check_param(data, "shutdown_timeout", NUMBER, None)
    check_param(data, "ignore_failures", bool, None)
    return await _instance_job(req, "", "OP_INSTANCE_REMOVE")


async def put_migrate(req: Request) -> int:
    """Migrate an instance (OP_INSTANCE_MIGRATE; `target_node` or placement); the job id."""
    data = body_params(req, MIGRATE_PARAMS, "instance migration")
    mode = check_param(data, "mode", (str, type(None)), None)
    if mode is not None and mode not in MIGRATION_MODES:
        raise HttpError(
            400, f"'mode' parameter: {mode!r} is not one of {', '.join(MIGRATION_MODES)}"
        )
    if check_param(data, "cleanup", bool, False):
        raise HttpError(
            400,
            "'cleanup' parameter: there is no failed migration to clean up (a migration "
            "here either completes or leaves the instance where it was); send no cleanup",
        )
    for flag in ("allow_failover", "ignore_ipolicy", "allow_runtime_changes"):
        check_param(data, flag, bool, None)
    check_param(data, "iallocator", (str, type(None)), None)
    return await _instance_job(req, "_migrate", "OP_INSTANCE_MIGRATE", **target_node(data))


async def put_failover(req: Request) -> int:
    """Fail an instance over (OP_INSTANCE_FAILOVER; `target_node` or placement); the job
    id."""
    data = body_params(req, FAILOVER_PARAMS, "instance failover")
    for flag in ("ignore_consistency", "ignore_ipolicy"):
        check_param(data, flag, bool, None)
    check_param(data, "shutdown_timeout", NUMBER, None)
    check_param(data, "iallocator", (str, type(None)), None)
    return await _instance_job(req, "_failover", "OP_INSTANCE_FAILOVER", **target_node(data))


def refuse_no_remember(req: Request, what: str) -> None:
    """400 for `?no_remember=1`: the admin state is the only state a simulated instance
    has, so a change that is not recorded would be no change."""
    if int_query(req, "no_remember"):
        raise HttpError(
            400, f"no_remember is not supported for {what}: the admin state is recorded"
        )


async def put_shutdown(req: Request) -> int:
    """Shut an instance down (OP_INSTANCE_SHUTDOWN, admin_state down); the job id."""
    refuse_dry_run(req, "instance shutdown")
    refuse_no_remember(req, "instance shutdown")
    data = body_params(req, SHUTDOWN_PARAMS, "instance shutdown")
    check_param(data, "timeout", NUMBER, None)
    check_param(data, "ignore_offline_nodes", bool, None)
    return await _instance_job(req, "_shutdown", "OP_INSTANCE_SHUTDOWN")


async def put_startup(req: Request) -> int:
    """Start an instance up (OP_INSTANCE_STARTUP, admin_state up); the job id."""
    refuse_dry_run(req, "instance startup")
    refuse_no_remember(req, "instance startup")
    data = body_params(req, STARTUP_PARAMS, "instance startup")
    for flag in STARTUP_PARAMS:
        check_param(data, flag, bool, None)
    return await _instance_job(req, "_startup", "OP_INSTANCE_STARTUP")
