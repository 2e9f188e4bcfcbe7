"""`lw audit`: who changed what (docs/contracts.md#audit-log).

Asks both daemons (`query_audit`) and reads lw-rapi's own audit file (RAPI user and token
changes) where this user may read it, and prints the entries merged by time, newest last:
a table (time, daemon, actor, uid, method, target, outcome; `-o` for others), or with
`--json` one JSON array of whole entries.
"""

from __future__ import annotations

import argparse
import sqlite3

import msgspec

from client.audit import AuditEntry, Query, merged
from client.audit_file import audit_path, read
from client.cli.context import EXIT_OK, Context
from client.cli.output import Fields, print_table, to_json
from client.cli.rapi_users import rapi_dir

FIELDS = Fields(
    known=(
        "time",
        "seq",
        "daemon",
        "actor",
        "uid",
        "pid",
        "job_id",
        "method",
        "target",
        "outcome",
        "serial",
    ),
    default=("time", "daemon", "actor", "uid", "method", "target", "outcome"),
)


def _cell(entry: AuditEntry, field: str) -> object:
    return entry.ts if field == "time" else getattr(entry, field)


def audit(ctx: Context, args: argparse.Namespace) -> int:
    """lw audit [--since D|T] [--until D|T] [--actor A] [--target T] [--limit N] [--json]"""
    query = Query(args.since, args.until, args.actor, args.target, args.limit)
    asked = msgspec.structs.asdict(query)
    parts = [ctx.luxi.query_audit(**asked), ctx.wconfd.query_audit(**asked)]
    directory = rapi_dir(ctx, args)
    try:
        parts.append(read(directory, query))
    except (OSError, sqlite3.Error) as exc:  # another user's file (0600), or damaged
        ctx.note(
            f"lw: {audit_path(directory)}: not readable ({exc}); RAPI user and token "
            "changes are left out"
        )
    entries = merged(parts, query.limit)
    if args.json:
        ctx.out(to_json(entries))
        return EXIT_OK
    fields = FIELDS.choose(args.output)
    print_table(ctx, args, fields, [[_cell(e, f) for f in fields] for e in entries])
    return EXIT_OK
