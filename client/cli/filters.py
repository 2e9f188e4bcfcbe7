"""`lw filter …`: the job filter rules (docs/contracts.md#filters), kept by luxid in the
configuration."""

from __future__ import annotations

import argparse
import time
from typing import Any

from client import errors
from client.cli.context import EXIT_OK, Context, UsageError
from client.cli.output import Fields, print_record, print_table
from client.vocabulary import WORD_FILTER_ACTIONS as ACTIONS

FILTER_FIELDS = Fields(
    known=("uuid", "watermark", "priority", "predicates", "action", "reason_trail"),
    default=("uuid", "priority", "watermark", "action", "predicates"),
)
REASON_SOURCE = "lw:client:lw-filter"


def parse_action(text: str) -> str | list[Any]:
    """`ACCEPT`, `PAUSE`, `REJECT`, `CONTINUE` or `RATE_LIMIT n` → the wire form."""
    words = text.split()
    if len(words) == 1 and words[0].upper() in ACTIONS:
        return words[0].upper()
    if len(words) == 2 and words[0].upper() == "RATE_LIMIT":
        if words[1].isdigit() and int(words[1]) > 0:
            return ["RATE_LIMIT", int(words[1])]
        raise UsageError(f"RATE_LIMIT needs a positive integer, got {words[1]!r}")
    raise UsageError(f'--action {text!r}: expected one of {", ".join(ACTIONS)} or "RATE_LIMIT n"')


def action_text(action: Any) -> str:
    """The wire action as the CLI writes it (`RATE_LIMIT 3`)."""
    if isinstance(action, list):
        return " ".join(str(part) for part in action)
    return str(action)


def parse_predicates(text: str) -> list[Any]:
    """--predicates: a JSON list of `[name, expression]` predicates."""
    import json  # only here: its error messages name line and column

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"--predicates is not JSON: {exc}") from None
    if not isinstance(value, list):
        raise UsageError(
            '--predicates must be a JSON list, e.g. \'[["jobid", [">", "id", "watermark"]]]\''
        )
    return value


def _rows_for_display(
    args: argparse.Namespace, fields: list[str], rows: list[list[Any]]
) -> list[list[Any]]:
    """Tables show actions as `RATE_LIMIT 3`; JSON keeps the wire form."""
    if args.json or "action" not in fields:
        return rows
    at = fields.index("action")
    return [[action_text(v) if i == at else v for i, v in enumerate(row)] for row in rows]


def filter_list(ctx: Context, args: argparse.Namespace) -> int:
    """lw filter list"""
    fields = FILTER_FIELDS.choose(args.output)
    rows = ctx.luxi.query_filters(uuids=None, fields=fields)
    print_table(ctx, args, fields, _rows_for_display(args, fields, rows))
    return EXIT_OK


def filter_info(ctx: Context, args: argparse.Namespace) -> int:
    """lw filter info UUID"""
    fields = FILTER_FIELDS.choose(args.output, record=True)
    rows = ctx.luxi.query_filters(uuids=[args.uuid], fields=fields)
    if not rows:
        raise errors.NotFound(f"no filter rule {args.uuid} (see `lw filter list`)")
    print_record(ctx, args, fields, _rows_for_display(args, fields, rows)[0])
    return EXIT_OK


def _reason_trail(args: argparse.Namespace, trail: list[Any]) -> list[Any]:
    if args.reason:
        return [*trail, [REASON_SOURCE, args.reason, time.time_ns()]]
    return trail


def filter_add(ctx: Context, args: argparse.Namespace) -> int:
    """lw filter add …: prints the new rule's uuid."""
    uuid = ctx.luxi.replace_filter(
        uuid=None,
        priority=0 if args.priority is None else args.priority,
        predicates=[] if args.predicates is None else parse_predicates(args.predicates),
        action="CONTINUE" if args.action is None else parse_action(args.action),
        reason=_reason_trail(args, []),
    )
    ctx.out(uuid)
    return EXIT_OK


def filter_replace(ctx: Context, args: argparse.Namespace) -> int:
    """lw filter replace UUID …: options not given keep the rule's current values (a rule
    that does not exist yet is created with the defaults of `lw filter add`)."""
    given: dict[str, Any] = {}
    if args.priority is not None:
        given["priority"] = args.priority
    if args.predicates is not None:
        given["predicates"] = parse_predicates(args.predicates)
    if args.action is not None:
        given["action"] = parse_action(args.action)
    rule: dict[str, Any] = {
        "priority": 0,
        "predicates": [],
        "action": "CONTINUE",
        "reason_trail": [],
    }
    names = list(rule)
    try:
        rows = ctx.luxi.query_filters(uuids=[args.uuid], fields=names)
    except errors.NotFound:
        rows = []
    if rows:
        rule = dict(zip(names, rows[0], strict=True))
    rule.update(given)
    uuid = ctx.luxi.replace_filter(
        uuid=args.uuid,
        priority=rule["priority"],
        predicates=rule["predicates"],
        action=rule["action"],
        reason=_reason_trail(args, list(rule["reason_trail"] or [])),
    )
    ctx.out(uuid)
    return EXIT_OK


def filter_delete(ctx: Context, args: argparse.Namespace) -> int:
    """lw filter delete UUID"""
    ctx.luxi.delete_filter(uuid=args.uuid)
    return EXIT_OK
