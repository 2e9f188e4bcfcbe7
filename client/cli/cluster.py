"""`lw info`, `lw node …` and `lw instance …`: the configuration as tables, and the jobs
that change it.

Listings read wconfd's configuration once (`get_config`) and show names where the
configuration stores uuids (a node's group, an instance's nodes).  Changes go through
luxid as opcode jobs, never straight to wconfd.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from client import errors, rapi_endpoint
from client.cli.context import (
    EXIT_OK,
    EXIT_UNREACHABLE,
    Context,
    Failed,
    UsageError,
    unreachable_message,
)
from client.cli.jobs import opcode, submit_and_wait
from client.cli.output import Fields, print_record, print_table
from client.configview import ConfigView, Obj

Getter = Callable[[Obj], Any]

NODE_FIELDS = Fields(
    known=[
        "name",
        "uuid",
        "group",
        "primary_ip",
        "offline",
        "drained",
        "master_candidate",
        "vm_capable",
        "mtotal",
        "mfree",
        "ctotal",
        "cfree",
        "pinst_cnt",
        "pinst_list",
        "serial_no",
        "ctime",
        "mtime",
        "tags",
    ],
    default=(
        "name",
        "group",
        "primary_ip",
        "offline",
        "drained",
        "master_candidate",
        "mtotal",
        "mfree",
        "ctotal",
        "pinst_cnt",
    ),
)
INSTANCE_FIELDS = Fields(
    known=[
        "name",
        "uuid",
        "primary_node",
        "secondary_nodes",
        "admin_state",
        "memory",
        "vcpus",
        "disk_sizes",
        "disks",
        "nic_macs",
        "nics",
        "serial_no",
        "ctime",
        "mtime",
        "tags",
    ],
    default=("name", "primary_node", "admin_state", "memory", "vcpus", "disk_sizes"),
)
INFO_FIELDS = Fields(
    known=[
        "name",
        "uuid",
        "max_running_jobs",
        "mac_prefix",
        "lock_enforcement",
        "tags",
        "nodegroups",
        "nodes",
        "instances",
        "networks",
        "filters",
        "config_serial",
        "drained",
        "running",
        "jobs",
        "metrics_url",
    ],
    default=(),
)


def _node_getters(view: ConfigView) -> dict[str, Getter]:
    """How the computed node fields are read (names instead of uuids, instance counts,
    room: mtotal/ctotal as stored (defaults for old documents), mfree/cfree computed)."""
    return {
        "group": lambda n: view.group_name(n.get("group")),
        "mtotal": lambda n: view.room(n).mtotal,
        "mfree": lambda n: view.room(n).mfree,
        "ctotal": lambda n: view.room(n).ctotal,
        "cfree": lambda n: view.room(n).cfree,
        "pinst_cnt": lambda n: len(view.primary_instances(n)),
        "pinst_list": view.primary_instances,
    }


def _instance_getters(view: ConfigView) -> dict[str, Getter]:
    """How the computed instance fields are read (node names, disk sizes, MACs)."""
    return {
        "primary_node": lambda i: view.node_name(i.get("primary_node")),
        "secondary_nodes": lambda i: [view.node_name(u) for u in i.get("secondary_nodes", [])],
        "disk_sizes": lambda i: [d.get("size") for d in i.get("disks", [])],
        "nic_macs": lambda i: [n.get("mac") for n in i.get("nics", [])],
    }


def _find(view: ConfigView, kind: str, key: str, label: str) -> Obj:
    obj = view.find(kind, key)
    if obj is None:
        raise Failed(f"no {label} {key!r} (see `lw {label} list`)")
    return obj


def _row(obj: Obj, fields: list[str], getters: dict[str, Getter]) -> list[Any]:
    return [getters[f](obj) if f in getters else obj.get(f) for f in fields]


def _view(ctx: Context) -> ConfigView:
    return ConfigView(ctx.wconfd.get_config())


# -- lw info ---------------------------------------------------------------------------------


def info(ctx: Context, args: argparse.Namespace) -> int:
    """lw info: the cluster object, object counts and the queue (luxid may be down)."""
    config = ctx.wconfd.get_config()
    cluster = config["cluster"]
    values: dict[str, Any] = {
        "name": cluster.get("name"),
        "uuid": cluster.get("uuid"),
        "max_running_jobs": cluster.get("max_running_jobs"),
        "mac_prefix": cluster.get("mac_prefix"),
        "lock_enforcement": cluster.get("lock_enforcement"),
        "tags": cluster.get("tags"),
        "config_serial": config.get("serial_no"),
        "metrics_url": rapi_endpoint.metrics_url(ctx.run_dir),
    }
    for kind in ("nodegroups", "nodes", "instances", "networks", "filters"):
        values[kind] = len(config.get(kind, {}))
    unreachable: errors.ConnectionError | None = None
    try:
        queue = ctx.luxi.query_queue_info()
        values.update(drained=queue.drained, running=queue.running, jobs=queue.counts)
    except errors.ConnectionError as exc:
        unreachable = exc
    fields = INFO_FIELDS.choose(args.output, record=True)
    print_record(ctx, args, fields, [values.get(f) for f in fields])
    if unreachable is not None:
        ctx.note(unreachable_message(unreachable, ctx.run_dir))
        return EXIT_UNREACHABLE
    return EXIT_OK


# -- lw node … -------------------------------------------------------------------------------


def node_list(ctx: Context, args: argparse.Namespace) -> int:
    """lw node list"""
    fields = NODE_FIELDS.choose(args.output)
    view = _view(ctx)
    getters = _node_getters(view)
    print_table(ctx, args, fields, [_row(n, fields, getters) for n in view.objects("nodes")])
    return EXIT_OK


def node_info(ctx: Context, args: argparse.Namespace) -> int:
    """lw node info NAME"""
    fields = NODE_FIELDS.choose(args.output, record=True)
    view = _view(ctx)
    print_record(
        ctx,
        args,
        fields,
        _row(_find(view, "nodes", args.name, "node"), fields, _node_getters(view)),
    )
    return EXIT_OK


def node_add(ctx: Context, args: argparse.Namespace) -> int:
    """lw node add NAME [--memory 64G] [--cpus 32]"""
    op = opcode(
        "OP_NODE_ADD", args, node_name=args.name, group=args.group, primary_ip=args.primary_ip,
        mtotal=args.memory, ctotal=args.cpus,
    )  # fmt: skip
    return submit_and_wait(ctx, args, [op])


def node_remove(ctx: Context, args: argparse.Namespace) -> int:
    """lw node remove NAME"""
    return submit_and_wait(ctx, args, [opcode("OP_NODE_REMOVE", args, node_name=args.name)])


def node_modify(ctx: Context, args: argparse.Namespace) -> int:
    """lw node modify NAME [--offline] [--drained] [--master-candidate] [--memory] [--cpus]"""
    changes = {
        "offline": args.offline,
        "drained": args.drained,
        "master_candidate": args.master_candidate,
        "mtotal": args.memory,
        "ctotal": args.cpus,
    }
    if all(v is None for v in changes.values()):
        raise UsageError(
            "nothing to change: give --offline, --drained, --master-candidate, --memory or --cpus"
        )
    return submit_and_wait(
        ctx, args, [opcode("OP_NODE_SET_PARAMS", args, node_name=args.name, **changes)]
    )


# -- lw instance … ---------------------------------------------------------------------------


def instance_list(ctx: Context, args: argparse.Namespace) -> int:
    """lw instance list"""
    fields = INSTANCE_FIELDS.choose(args.output)
    view = _view(ctx)
    getters = _instance_getters(view)
    rows = [_row(i, fields, getters) for i in view.objects("instances")]
    print_table(ctx, args, fields, rows)
    return EXIT_OK


def instance_info(ctx: Context, args: argparse.Namespace) -> int:
    """lw instance info NAME"""
    fields = INSTANCE_FIELDS.choose(args.output, record=True)
    view = _view(ctx)
    inst = _find(view, "instances", args.name, "instance")
    print_record(ctx, args, fields, _row(inst, fields, _instance_getters(view)))
    return EXIT_OK


def instance_add(ctx: Context, args: argparse.Namespace) -> int:
    """lw instance add NAME --memory M --vcpus N --disk SIZE…"""
    op = opcode(
        "OP_INSTANCE_CREATE",
        args,
        instance_name=args.name,
        memory=args.memory,
        vcpus=args.vcpus,
        disks=[{"size": size} for size in args.disk],
        pnode=args.node,
        nics=args.nics,
    )
    return submit_and_wait(ctx, args, [op])


def instance_remove(ctx: Context, args: argparse.Namespace) -> int:
    """lw instance remove NAME"""
    return submit_and_wait(ctx, args, [opcode("OP_INSTANCE_REMOVE", args, instance_name=args.name)])


def instance_migrate(ctx: Context, args: argparse.Namespace) -> int:
    """lw instance migrate NAME [--target-node NODE]"""
    op = opcode("OP_INSTANCE_MIGRATE", args, instance_name=args.name, target_node=args.target_node)
    return submit_and_wait(ctx, args, [op])
