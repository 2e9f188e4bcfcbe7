"""`lw budget …`: disruption budgets (docs/contracts.md#disruption-budgets), kept by luxid
in the configuration and enforced at every job start."""

from __future__ import annotations

import argparse
from typing import Any

import msgspec

from client import errors
from client.cli.context import EXIT_OK, Context
from client.cli.output import Fields, print_record, print_table

BUDGET_FIELDS = Fields(
    known=("name", "tags", "max_disrupted", "members", "disrupted", "events"),
    default=("name", "tags", "max_disrupted", "members", "disrupted"),
)


def _cells(row: dict[str, Any], fields: list[str], args: argparse.Namespace) -> list[Any]:
    """A row's values; tables and records show text instead of nested lists (a listing
    counts members and events, a record lists them)."""
    if args.json:
        return [row[f] for f in fields]
    record = args.handler.endswith("budget_info")
    shown = {
        "tags": ",".join(row["tags"]),
        "members": ", ".join(row["members"]) or "-" if record else len(row["members"]),
        "disrupted": ", ".join(f"{inst} ({why})" for inst, why in row["disrupted"]) or "-",
        "events": "; ".join(str(m) for _, m in row["events"]) or "-"
        if record
        else len(row["events"]),
    }
    return [shown.get(f, row[f]) for f in fields]


def _rows(ctx: Context) -> list[dict[str, Any]]:
    return [msgspec.to_builtins(row) for row in ctx.luxi.query_budgets()]


def budget_list(ctx: Context, args: argparse.Namespace) -> int:
    """lw budget list"""
    fields = BUDGET_FIELDS.choose(args.output)
    print_table(ctx, args, fields, [_cells(row, fields, args) for row in _rows(ctx)])
    return EXIT_OK


def budget_info(ctx: Context, args: argparse.Namespace) -> int:
    """lw budget info NAME: the budget with its members, disrupted ones and events."""
    fields = BUDGET_FIELDS.choose(args.output, record=True)
    for row in _rows(ctx):
        if row["name"] == args.name:
            print_record(ctx, args, fields, _cells(row, fields, args))
            return EXIT_OK
    raise errors.NotFound(f"no budget named {args.name!r} (see `lw budget list`)")


def budget_set(ctx: Context, args: argparse.Namespace) -> int:
    """lw budget set NAME --tags web,db --max-disrupted N"""
    tags = [t.strip() for t in args.tags.split(",") if t.strip()]
    row = ctx.luxi.set_budget(name=args.name, tags=tags, max_disrupted=args.max_disrupted)
    members = len(row.members)
    ctx.out(
        f"budget {row.name}: at most {row.max_disrupted} of {members} member(s) disrupted at once"
    )
    return EXIT_OK


def budget_delete(ctx: Context, args: argparse.Namespace) -> int:
    """lw budget delete NAME"""
    ctx.luxi.delete_budget(name=args.name)
    return EXIT_OK
