"""The one way `lw` prints data: tables and records, or JSON (`--json`).

Every list command hands `print_table` its field names and rows; every info command hands
`print_record` one row.  Both honour `-o/--output`, `--no-headers`, `--separator` and
`--json` the way Ganeti's `gnt-*` tools do: aligned columns by default, exact separators
for scripts, and JSON with the raw values (timestamps as epoch seconds, lists as lists).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import msgspec

from client.cli.context import Context, UsageError

# Fields holding epoch seconds (or per-opcode lists of them): shown as local times.
TIME_FIELDS = frozenset(
    {
        "received_ts",
        "start_ts",
        "end_ts",
        "opstart",
        "opexec",
        "opend",
        "ctime",
        "mtime",
        "since",
        "created",
        "expires",
        "time",
    }
)


class Fields:
    """The fields a kind of object offers, and the ones a listing shows by default."""

    def __init__(self, known: Sequence[str], default: Sequence[str]) -> None:
        self.known = tuple(known)
        self.default = tuple(default)

    def choose(self, spec: str | None, *, record: bool = False) -> list[str]:
        """The fields `-o` asks for: a list, or '+a,b' to add to the defaults.

        Without `-o` a listing shows the defaults and a record (info) every field.
        """
        base = list(self.known if record else self.default)
        if not spec:
            return base
        extend = spec.startswith("+")
        names = [name.strip() for name in spec.lstrip("+").split(",") if name.strip()]
        unknown = [name for name in names if name not in self.known]
        if unknown:
            raise UsageError(
                f"unknown field(s) {', '.join(unknown)}; known fields: {' '.join(self.known)}"
            )
        if not names:
            raise UsageError("-o needs at least one field name")
        return base + [n for n in names if n not in base] if extend else names


def to_json(value: Any) -> str:
    """Indented JSON of plain values or msgspec Structs."""
    return msgspec.json.format(msgspec.json.encode(value), indent=2).decode()


def _format_time(value: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(value))


def format_value(field: str, value: Any) -> str:
    """One cell: '-' for nothing, Y/N for booleans, local times, comma-joined lists."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "Y" if value else "N"
    if field in TIME_FIELDS and isinstance(value, int | float):
        return _format_time(value)
    if isinstance(value, list | tuple):
        if all(not isinstance(v, list | tuple | dict) for v in value):
            return ",".join(format_value(field, v) for v in value)
        return msgspec.json.encode(value).decode()
    if isinstance(value, dict):
        if all(not isinstance(v, list | tuple | dict) for v in value.values()):
            return ",".join(f"{k}={format_value(field, v)}" for k, v in value.items())
        return msgspec.json.encode(value).decode()
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def render_table(
    fields: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    headers: bool = True,
    separator: str | None = None,
) -> list[str]:
    """The lines of a table; numeric columns are right-aligned when not separated."""
    cells = [[format_value(f, v) for f, v in zip(fields, row, strict=True)] for row in rows]
    head = [f.upper() for f in fields]
    if separator is not None:
        lines = [separator.join(head)] if headers else []
        return lines + [separator.join(line) for line in cells]
    numeric = [
        bool(rows) and all(_is_number(row[i]) or row[i] is None for row in rows)
        for i in range(len(fields))
    ]
    table = ([head] if headers else []) + cells
    widths = [max((len(line[i]) for line in table), default=0) for i in range(len(fields))]
    out = []
    for line in table:
        parts = [
            cell.rjust(width) if right else cell.ljust(width)
            for cell, width, right in zip(line, widths, numeric, strict=True)
        ]
        out.append(" ".join(parts).rstrip())
    return out


def print_table(
    ctx: Context, args: argparse.Namespace, fields: Sequence[str], rows: Sequence[Sequence[Any]]
) -> None:
    """A listing: a table, or with `--json` a JSON list of objects."""
    if getattr(args, "json", False):
        ctx.out(to_json([dict(zip(fields, row, strict=True)) for row in rows]))
        return
    for line in render_table(fields, rows, headers=not args.no_headers, separator=args.separator):
        ctx.out(line)


def render_record(
    fields: Sequence[str], row: Sequence[Any], *, headers: bool = True, separator: str | None = None
) -> list[str]:
    """The lines of one object: `field: value`, nested lists one element per line."""
    lines = []
    sep = ": " if separator is None else separator
    width = max((len(f) for f in fields), default=0) if separator is None else 0
    for field, value in zip(fields, row, strict=True):
        label = f"{field}{sep}".ljust(width + len(sep)) if headers else ""
        nested = isinstance(value, list | tuple) and any(
            isinstance(v, list | tuple | dict) for v in value
        )
        if nested and separator is None:
            lines.append(label.rstrip() if headers else "")
            lines.extend(f"  - {format_value(field, item)}" for item in value)
        else:
            lines.append(f"{label}{format_value(field, value)}")
    return lines


def print_record(
    ctx: Context, args: argparse.Namespace, fields: Sequence[str], row: Sequence[Any]
) -> None:
    """An info view: `field: value` lines, or with `--json` one JSON object."""
    if getattr(args, "json", False):
        ctx.out(to_json(dict(zip(fields, row, strict=True))))
        return
    for line in render_record(fields, row, headers=not args.no_headers, separator=args.separator):
        ctx.out(line)
