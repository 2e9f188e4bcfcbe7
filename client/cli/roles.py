"""`lw cluster role` and `lw cluster failover`: the control-plane nodes' roles and a
handover of mastership, through the local wconfd."""

from __future__ import annotations

import argparse
from typing import Any

from client import errors
from client.cli.context import EXIT_OK, Context, Failed, not_master_message
from client.cli.output import Fields, print_table

ROLE_FIELDS = Fields(
    known=("node", "role", "master", "term"), default=("node", "role", "master", "term")
)


def _row(role: Any) -> list[Any]:
    return [role.node, role.role, role.master, role.term]


def cluster_role(ctx: Context, args: argparse.Namespace) -> int:
    """lw cluster role: every node from the master; on a standby, this node's own role."""
    fields = ROLE_FIELDS.choose(args.output)
    index = [ROLE_FIELDS.known.index(f) for f in fields]
    try:
        rows = [_row(role) for role in ctx.wconfd.list_roles()]
    except errors.NotMaster as exc:
        rows = [_row(ctx.wconfd.get_role())]
        ctx.note(f"lw: {not_master_message(exc)}; ask it for every node's role")
    print_table(ctx, args, fields, [[row[i] for i in index] for row in rows])
    return EXIT_OK


def cluster_failover(ctx: Context, args: argparse.Namespace) -> int:
    """lw cluster failover: the master steps down; report who took over."""
    if args.wait < 0:
        raise Failed("--wait must be 0 or more seconds")
    role = ctx.wconfd.step_down(wait=args.wait)
    hint = "(is a standby running? `lw cluster role` shows the nodes that are up)"
    if role.master is None:
        raise Failed(
            f"{role.node} stepped down, but no node became master within {args.wait:g} s {hint}"
        )
    if role.master == role.node:
        raise Failed(
            f"{role.node} stepped down, but no other node took over while it paused, and it"
            f" is master again {hint}"
        )
    ctx.out(f"{role.node} stepped down; the master is now {role.master} (term {role.term})")
    return EXIT_OK
