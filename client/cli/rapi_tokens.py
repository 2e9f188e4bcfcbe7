"""`lw rapi-user token|tokens|revoke`: RAPI bearer tokens from the command line.

Tokens are made and revoked by client.rapi_tokens (lw-rapi's `POST /2/tokens` makes them
the same way); lw-rapi rereads the tokens file when it changes, so a revoked token is
refused from the next request on.
"""

from __future__ import annotations

import argparse
import time

from client.cli.context import EXIT_OK, Context, Failed
from client.cli.rapi_users import rapi_dir, record_change
from client.rapi_tokens import TokenError, create_token, read_tokens, revoke_token, tokens_path

FIELDS = ("id", "user", "roles", "created", "expires")


def token_create(ctx: Context, args: argparse.Namespace) -> int:
    """lw rapi-user token NAME [--roles R,...] [--expires DURATION]"""
    try:
        secret, token = create_token(
            rapi_dir(ctx, args), args.name, args.roles, args.expires, time.time()
        )
    except TokenError as exc:
        raise Failed(str(exc)) from None
    record_change(ctx, args, "token_create", f"token/{token.id}")
    ctx.out(f"token: {secret}")
    ctx.out(f"id: {token.id}")
    return EXIT_OK


def token_list(ctx: Context, args: argparse.Namespace) -> int:
    """lw rapi-user tokens [NAME] [--json]"""
    from client.cli.output import Fields, print_table

    fields = Fields(known=FIELDS, default=FIELDS).choose(args.output)
    directory = rapi_dir(ctx, args)
    tokens, problems = read_tokens(directory)
    for problem in problems:
        ctx.note(f"lw: {tokens_path(directory)}: {problem}")
    shown = sorted(
        (t for t in tokens.values() if args.name is None or t.user == args.name),
        key=lambda t: (t.created, t.id),
    )
    print_table(ctx, args, fields, [[getattr(t, f) for f in fields] for t in shown])
    return EXIT_OK


def token_revoke(ctx: Context, args: argparse.Namespace) -> int:
    """lw rapi-user revoke ID"""
    try:
        token = revoke_token(rapi_dir(ctx, args), args.id)
    except TokenError as exc:
        raise Failed(str(exc)) from None
    record_change(ctx, args, "token_revoke", f"token/{token.id}")
    ctx.out(f"revoked token {token.id} of RAPI user {token.user}")
    return EXIT_OK
