"""`lw rapi-user add|list|remove`: the RAPI users file from the command line.

The file's format and its locked, atomic editing are `client.rapi_users`'s (lw-rapi reads
it with the same module); this module only asks for passwords and prints.
"""

from __future__ import annotations

import argparse

from client.cli.context import EXIT_OK, Context, Failed, UsageError
from client.rapi_users import (
    NAME_RE,
    User,
    edit_users_file,
    format_user,
    hash_password,
    parse_users,
    user_line,
    users_path,
)


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


def user_add(ctx: Context, args: argparse.Namespace) -> int:
    """lw rapi-user add NAME [--write] [--password-stdin]"""
    if not NAME_RE.match(args.name):
        raise UsageError(f"bad user name {args.name!r}: use letters, digits and . _ @ + -")
    user = User(args.name, hash_password(_read_password(args)), args.write)
    path = users_path(ctx.state_dir)
    with edit_users_file(path) as lines:
        index = user_line(lines, args.name)
        if index is None:
            lines.append(format_user(user))
        else:
            lines[index] = format_user(user)
    rights = "read-write" if user.write else "read-only"
    ctx.out(
        f"{'added' if index is None else 'replaced'} RAPI user {args.name} ({rights}) in {path}"
    )
    return EXIT_OK


def user_list(ctx: Context, args: argparse.Namespace) -> int:
    """lw rapi-user list"""
    from client.cli.output import Fields, print_table

    fields = Fields(known=("name", "write"), default=("name", "write")).choose(args.output)
    try:
        text = users_path(ctx.state_dir).read_text()
    except FileNotFoundError:
        text = ""
    users, problems = parse_users(text)
    for problem in problems:
        ctx.note(f"lw: {users_path(ctx.state_dir)}: {problem}")
    rows = [[getattr(u, f) for f in fields] for u in sorted(users.values(), key=lambda u: u.name)]
    print_table(ctx, args, fields, rows)
    return EXIT_OK


def user_remove(ctx: Context, args: argparse.Namespace) -> int:
    """lw rapi-user remove NAME"""
    path = users_path(ctx.state_dir)
    with edit_users_file(path) as lines:
        index = user_line(lines, args.name)
        if index is None:
            raise Failed(f"no RAPI user {args.name!r} in {path}")
        del lines[index]
    ctx.out(f"removed RAPI user {args.name}")
    return EXIT_OK
