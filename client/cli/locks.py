"""`lw lock list`: every lock with its owners and the requests waiting for it (wconfd's
`list_all_locks`), in lock order."""

from __future__ import annotations

import argparse
from typing import Any

from client.cli.context import EXIT_OK, Context
from client.cli.output import Fields, print_table
from client.vocabulary import LEVEL_INDEX, LEVELS, LOCKSET, RELEASE, LockKey

LOCK_FIELDS = Fields(
    known=("name", "mode", "owners", "pending"), default=("name", "mode", "owners", "pending")
)


def lock_order(name: str) -> LockKey:
    """The total lock order (docs/contracts.md#lock-names-and-order; the vocabulary's lock
    key); a name the daemon should never show, with an unknown level, sorts last instead of
    failing the listing."""
    level, _, member = name.partition("/")
    return (LEVEL_INDEX.get(level, len(LEVELS)), 0 if member == LOCKSET else 1, member)


def lock_rows(all_locks: dict[str, Any]) -> list[list[Any]]:
    """Rows of (name, mode, owners, pending) from list_all_locks' answer.

    `mode` is the held mode (owners share one mode), `owners` the client ids, `pending` the
    waiting requests for the lock as `client_id:mode`; a lock only waited for has mode null.
    """
    rows: dict[str, list[Any]] = {}
    for lock in all_locks["locks"]:
        owners = lock["owners"]
        mode = owners[0]["mode"] if owners else None
        rows[lock["name"]] = [lock["name"], mode, [o["client_id"] for o in owners], []]
    for request in all_locks["pending"]:
        for name, mode in request["request"]:
            if mode == RELEASE:
                continue
            row = rows.setdefault(name, [name, None, [], []])
            row[3].append(f"{request['client_id']}:{mode}")
    return [rows[name] for name in sorted(rows, key=lock_order)]


def lock_list(ctx: Context, args: argparse.Namespace) -> int:
    """lw lock list"""
    import msgspec

    fields = LOCK_FIELDS.choose(args.output)
    rows = lock_rows(msgspec.to_builtins(ctx.wconfd.list_all_locks()))
    index = [LOCK_FIELDS.known.index(f) for f in fields]
    print_table(ctx, args, fields, [[row[i] for i in index] for row in rows])
    return EXIT_OK
