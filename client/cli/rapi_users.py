"""`lw rapi-user add|list|remove`: the RAPI users file from the command line.

The file's format and its locked, atomic editing are `client.rapi_users`'s (lw-rapi reads
it with the same module); this module only asks for passwords and prints.  Tokens are
client.cli.rapi_tokens's.  Both find lw-rapi's files with `rapi_dir`.
"""

from __future__ import annotations

import argparse
import sqlite3
from pathlib import Path

from client import paths
from client.cli.context import EXIT_OK, Context, Failed, UsageError
from client.rapi_users import (
    NAME_RE,
    User,
    edit_lines,
    format_roles,
    format_user,
    hash_password,
    parse_roles,
    parse_users,
    user_line,
    users_path,
)


def rapi_dir(ctx: Context, args: argparse.Namespace) -> Path:
    """lw-rapi's state directory (--rapi-state-dir, $LW_RAPI_STATE_DIR, …)."""
    return paths.rapi_state_dir(args.rapi_state_dir, ctx.state_dir)


def record_change(ctx: Context, args: argparse.Namespace, method: str, target: str) -> None:
    """Append the change just made to lw-rapi's audit file, durably, for `cli:<login>`
    (docs/contracts.md#audit-log); Failed (exit 1) when it cannot be written."""
    from client.audit_file import audit_path, record
    from client.identity import cli_actor

    directory = rapi_dir(ctx, args)
    try:
        record(directory, method, target, cli_actor())
    except (OSError, sqlite3.Error) as exc:
        raise Failed(
            f"{target}: changed, but its audit entry could not be written to "
            f"{audit_path(directory)}: {exc}"
        ) from None


def _read_password(args: argparse.Namespace) -> str:
    import sys

    if args.password_stdin:
        password = sys.stdin.readline().rstrip("\r\n")
    else:
        import getpass

        if not sys.stdin.isatty():
            raise UsageError("no terminal to ask for the password on; use --password-stdin")
        password = getpass.getpass(f"Password for {args.name}: ")
        if getpass.getpass("Again: ") != password:
            raise UsageError("the passwords differ")
    if not password:
        raise UsageError("empty password")
    return password


def _roles(args: argparse.Namespace) -> frozenset[str]:
    try:
        roles = parse_roles(args.roles or "")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return roles | {"write"} if args.write else roles


def user_add(ctx: Context, args: argparse.Namespace) -> int:
    """lw rapi-user add NAME [--roles R,...] [--write] [--password-stdin]"""
    if not NAME_RE.match(args.name):
        raise UsageError(f"bad user name {args.name!r}: use letters, digits and . _ @ + -")
    roles = _roles(args)
    user = User(args.name, hash_password(_read_password(args)), roles)
    path = users_path(rapi_dir(ctx, args))
    with edit_lines(path) as lines:
        index = user_line(lines, args.name)
        if index is None:
            lines.append(format_user(user))
        else:
            lines[index] = format_user(user)
    record_change(ctx, args, "rapi_user_add", f"rapi-user/{args.name}")
    rights = f"roles {format_roles(roles)}" if roles else "read only"
    ctx.out(
        f"{'added' if index is None else 'replaced'} RAPI user {args.name} ({rights}) in {path}"
    )
    return EXIT_OK


def user_list(ctx: Context, args: argparse.Namespace) -> int:
    """lw rapi-user list"""
    from client.cli.output import Fields, print_table

    fields = Fields(known=("name", "roles"), default=("name", "roles")).choose(args.output)
    path = users_path(rapi_dir(ctx, args))
    try:
        text = path.read_text()
    except FileNotFoundError:
        text = ""
    users, problems = parse_users(text)
    for problem in problems:
        ctx.note(f"lw: {path}: {problem}")
    values = [
        {"name": u.name, "roles": [r for r in format_roles(u.roles).split(",") if r]}
        for u in sorted(users.values(), key=lambda u: u.name)
    ]
    print_table(ctx, args, fields, [[v[f] for f in fields] for v in values])
    return EXIT_OK


def user_remove(ctx: Context, args: argparse.Namespace) -> int:
    """lw rapi-user remove NAME"""
    path = users_path(rapi_dir(ctx, args))
    with edit_lines(path) as lines:
        index = user_line(lines, args.name)
        if index is None:
            raise Failed(f"no RAPI user {args.name!r} in {path}")
        del lines[index]
    record_change(ctx, args, "rapi_user_remove", f"rapi-user/{args.name}")
    ctx.out(f"removed RAPI user {args.name} (its tokens stop working with it)")
    return EXIT_OK
