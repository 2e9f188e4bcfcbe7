"""Ganeti's node operations over HTTP, in the shapes `ganeti.rapi.client` sends them
(rlib2's R_2_nodes_name_role and R_2_nodes_name_evacuate;
docs/rapi-drains.md#ganetis-node-role-and-evacuation):

- `GET /2/nodes/<name>/role` → "offline", "drained", "master-candidate" or "regular";
- `PUT /2/nodes/<name>/role` with a JSON string body (`SetNodeRole`) submits
  OP_NODE_SET_PARAMS with Ganeti's role semantics (one role at a time: setting drained,
  offline or master-candidate clears the other two; "regular" clears all three) and
  answers the job id.  It sets the flag only: `PUT /2/nodes/<name>/drain` is the drain
  that also moves the instances away;
- `POST /2/nodes/<name>/evacuate` with the body of Ganeti ≥ 2.5 (feature
  `node-evac-res1`: `{"mode", "iallocator", "remote_node", "early_release"}`, all
  optional) submits OP_NODE_EVACUATE and answers the job id.

Differences from Ganeti, each answered or documented rather than silently dropped: the
"master" role is not a flag (400, as in Ganeti); a node's role is its flags, since the
control plane is not a node that could report "master"; instances live on shared storage,
so evacuation moves primary instances ("primary-only" and "all" mean the same, and
"secondary-only" is a 400); placement by capacity (docs/capacity.md#placement) picks the
targets, so an `iallocator` name is accepted as Ganeti's default is, while a fixed
`remote_node` and `?dry-run=1` are 400.  `force` and `auto-promote` guard master-candidate
pool sizes, which Lockwarden has none of; they are accepted and have nothing to change.

Jobs carry Ganeti's reason trail: `["gnt:user", <?reason=…>, ns]` when given, then
`["gnt:library:rlib2:<resource>", "", ns]`.
"""

from __future__ import annotations

import time
from typing import Any, Final

from rapi.cluster import find_node
from rapi.routing import HttpError, Request, body_params, check_param, int_query
from rapi.shapes import node_role

# Ganeti's role names, by the role letter of rlib2's N_FIELDS.
ROLE_NAMES: Final = {"O": "offline", "D": "drained", "C": "master-candidate", "R": "regular"}
# OP_NODE_SET_PARAMS flags for each role a client may set.
ROLE_FLAGS: Final[dict[str, dict[str, bool]]] = {
    "drained": {"drained": True},
    "offline": {"offline": True},
    "master-candidate": {"master_candidate": True},
    "regular": {"offline": False, "drained": False, "master_candidate": False},
}
EVAC_BODY_PARAMS: Final = ("mode", "iallocator", "remote_node", "early_release")
EVAC_MODES: Final = ("primary-only", "all")
REASON_SOURCE_USER: Final = "gnt:user"
REASON_SOURCE_RLIB2: Final = "gnt:library:rlib2"


def reason_trail(req: Request, resource: str) -> list[list[Any]]:
    """rlib2's reason trail for a job a resource submits: the `reason` query argument
    (if any) as the user's entry, then the resource's own."""
    now = time.time_ns()
    trail: list[list[Any]] = []
    if req.query.get("reason"):
        trail.append([REASON_SOURCE_USER, req.query["reason"], now])
    trail.append([f"{REASON_SOURCE_RLIB2}:{resource}", "", now])
    return trail


async def submit(req: Request, resource: str, *ops: dict[str, Any]) -> int:
    """Submit one job of these opcodes, each with the resource's reason trail; its id
    (what every Ganeti resource that submits a job answers)."""
    trail = reason_trail(req, resource)
    job_id: int = await req.backend.luxi.submit_job(ops=[{**op, "reason": trail} for op in ops])
    return job_id


def refuse_dry_run(req: Request, what: str) -> None:
    """400 for `?dry-run=1`: a job here always runs (there is no check-only mode)."""
    if int_query(req, "dry-run"):
        raise HttpError(400, f"dry-run is not supported for {what}")


async def get_node_role(req: Request) -> str:
    """The node's role: "offline", "drained", "master-candidate" or "regular"."""
    return ROLE_NAMES[node_role(await find_node(req))]


async def put_node_role(req: Request) -> int:
    """Set the node's role (a JSON string body, as SetNodeRole sends it); the job id."""
    role = req.body
    if not isinstance(role, str):
        raise HttpError(
            400,
            "Body contents: the role must be a JSON string, one of "
            + ", ".join(f'"{r}"' for r in ROLE_FLAGS),
        )
    if role not in ROLE_FLAGS:
        raise HttpError(
            400, f"Can't set '{role}' role; the roles that can be set are {', '.join(ROLE_FLAGS)}"
        )
    node = await find_node(req)
    op = {"OP_ID": "OP_NODE_SET_PARAMS", "node_name": node["name"], **ROLE_FLAGS[role]}
    return await submit(req, "nodes_name_role", op)


def check_evacuation(req: Request) -> None:
    """400 for what an evacuation here cannot do (module docstring)."""
    refuse_dry_run(req, "node evacuation")
    data = body_params(req, EVAC_BODY_PARAMS, "node evacuation")
    mode = check_param(data, "mode", str, None)
    if mode is not None and mode not in EVAC_MODES:
        raise HttpError(
            400,
            f"'mode' parameter: {mode!r} is not supported: instances live on shared storage "
            f"and have no secondaries, so evacuation moves primary instances "
            f"(modes: {', '.join(EVAC_MODES)})",
        )
    check_param(data, "iallocator", str, None)
    check_param(data, "early_release", bool, None)
    if data.get("remote_node") is not None:
        raise HttpError(
            400,
            "'remote_node' parameter is not supported: placement by capacity chooses each "
            "instance's target (migrate one instance to a node with OP_INSTANCE_MIGRATE "
            "target_node)",
        )


async def post_node_evacuate(req: Request) -> int:
    """Move the node's primary instances away (OP_NODE_EVACUATE); the job id."""
    check_evacuation(req)
    node = await find_node(req)
    op = {"OP_ID": "OP_NODE_EVACUATE", "node_name": node["name"]}
    return await submit(req, "nodes_name_evacuate", op)
