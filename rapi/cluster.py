"""The cluster's RAPI resources: version, features, info, nodes, instances and node groups.

Each answer is built from one `get_config` read (a consistent snapshot) in the shapes of
`rapi.shapes`; `?bulk=1` lists and single resources are full objects, plain lists are
Ganeti's `[{"id", "uri"}]`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from client import __version__, errors
from client.configview import ConfigView
from rapi.routing import HttpError, Request, bulk, uri_list
from rapi.shapes import cluster_info, group_resource, instance_resource, node_resource

RAPI_VERSION = 2
# Ganeti's feature strings that hold here: node-evac-res1 makes Ganeti's client send
# POST /2/nodes/<name>/evacuate with its body form and take a job id back;
# instance-create-reqv1 makes its CreateInstance send POST /2/instances with the version 1
# body (without it the client refuses to create).  The others (instance-reinstall-reqv1,
# node-migrate-reqv1) name resources this RAPI does not serve.
FEATURES = ("instance-create-reqv1", "node-evac-res1")

Shape = Callable[[ConfigView, Mapping[str, Any]], dict[str, Any]]
# kind in the configuration document -> (label in messages, URI prefix, shape)
KINDS: dict[str, tuple[str, str, Shape]] = {
    "nodes": ("node", "/2/nodes", node_resource),
    "instances": ("instance", "/2/instances", instance_resource),
    "nodegroups": ("group", "/2/groups", group_resource),
}


async def _view(req: Request) -> ConfigView:
    return ConfigView(await req.backend.wconfd.get_config())


async def _list(req: Request, kind: str) -> list[dict[str, Any]]:
    """Names and URIs of one kind's objects, or (bulk) the objects."""
    want_bulk = bulk(req)
    view = await _view(req)
    _, prefix, shape = KINDS[kind]
    objs = view.objects(kind)
    if want_bulk:
        return [shape(view, o) for o in objs]
    return uri_list([o["name"] for o in objs], prefix + "/%s", "id")


async def _one(req: Request, kind: str) -> dict[str, Any]:
    """One object of a kind by name (or uuid); 404 if there is none."""
    view = await _view(req)
    label, _, shape = KINDS[kind]
    key = req.match["name"]
    obj = view.find(kind, key)
    if obj is None:
        raise HttpError(404, f"{label} '{key}' not found")
    return shape(view, obj)


async def lookup(req: Request, kind: str, key: str) -> dict[str, Any] | None:
    """The object of a kind ("node", "instance") by name or uuid; None if there is none."""
    try:
        obj: dict[str, Any] = await req.backend.wconfd.get_object(kind=kind, key=key)
    except errors.NotFound:
        return None
    return obj


async def lookup_node(req: Request) -> dict[str, Any] | None:
    """The node whose name (or uuid) is the {name} path parameter; None if there is none."""
    return await lookup(req, "node", req.match["name"])


async def find_node(req: Request) -> dict[str, Any]:
    """The node of the {name} path parameter; 404 if there is none."""
    node = await lookup_node(req)
    if node is None:
        raise HttpError(404, f"node '{req.match['name']}' not found")
    return node


async def find_instance(req: Request) -> dict[str, Any]:
    """The instance of the {name} path parameter; 404 if there is none (as `find_node`:
    an operation on an unknown object is refused before a job is submitted)."""
    inst = await lookup(req, "instance", req.match["name"])
    if inst is None:
        raise HttpError(404, f"instance '{req.match['name']}' not found")
    return inst


async def get_version(req: Request) -> int:
    """The remote API version (2)."""
    return RAPI_VERSION


async def get_features(req: Request) -> list[str]:
    """Ganeti's optional RAPI features that this RAPI has (`FEATURES`)."""
    return list(FEATURES)


async def get_info(req: Request) -> dict[str, Any]:
    """Cluster information (with the fields htools read) plus the queue at a glance."""
    view = await _view(req)
    queue = await req.backend.luxi.query_queue_info()
    return {
        **cluster_info(view),
        "software_version": __version__,
        "protocol_version": 1,
        "queue": {
            "drained": queue.drained,
            "running": queue.running,
            "counts": queue.counts,
            "filters": queue.filters,
        },
        "insecure_http": req.settings.insecure_http,
    }


async def get_nodes(req: Request) -> list[dict[str, Any]]:
    """Node names and URIs, or (bulk) the nodes."""
    return await _list(req, "nodes")


async def get_node(req: Request) -> dict[str, Any]:
    """One node by name (or uuid)."""
    return await _one(req, "nodes")


async def get_instances(req: Request) -> list[dict[str, Any]]:
    """Instance names and URIs, or (bulk) the instances."""
    return await _list(req, "instances")


async def get_instance(req: Request) -> dict[str, Any]:
    """One instance by name (or uuid)."""
    return await _one(req, "instances")


async def get_groups(req: Request) -> list[dict[str, Any]]:
    """Node group names and URIs, or (bulk) the groups."""
    return await _list(req, "nodegroups")


async def get_group(req: Request) -> dict[str, Any]:
    """One node group by name (or uuid)."""
    return await _one(req, "nodegroups")
