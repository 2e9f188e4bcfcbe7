"""`POST /2/tokens` (role admin): a bearer token for a user, made the way `lw rapi-user
token` makes it (client.rapi_tokens.create_token), in lw-rapi's own state directory, and
recorded in lw-rapi's audit file for the request's actor before the answer
(docs/contracts.md#audit-log)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from pathlib import Path
from typing import Any

from client.audit_file import record
from client.durations import parse_duration
from client.rapi_tokens import Token, TokenError, create_token
from rapi.routing import HttpError, Request, body_params, check_param

log = logging.getLogger(__name__)

TOKEN_BODY_PARAMS = ("user", "roles", "expires")


async def post_token(req: Request) -> dict[str, Any]:
    """Body `{"user", "roles": [R]|null, "expires": DURATION|null}`: `{"id", "token",
    "user", "roles", "expires"}`; 400 naming what is wrong (an unknown user, a role the
    user lacks, a bad duration)."""
    data = body_params(req, TOKEN_BODY_PARAMS, "a token")
    user = check_param(data, "user", str, None)
    if user is None:
        raise HttpError(400, "Required parameter 'user' is missing")
    roles = check_param(data, "roles", (list, type(None)), None)
    if roles is not None and not all(isinstance(r, str) for r in roles):
        raise HttpError(400, "'roles' parameter: a list of role names, or null")
    expires = check_param(data, "expires", (str, type(None)), None)
    try:
        lifetime = None if expires is None else parse_duration(expires)
        secret, token = await asyncio.to_thread(
            _create_recorded, req.settings.state_dir, user, roles, lifetime, req.actor
        )
    except (TokenError, ValueError) as exc:
        raise HttpError(400, str(exc)) from None
    except (OSError, sqlite3.Error) as exc:
        log.error("token %r: the audit entry could not be written: %s", user, exc)
        raise HttpError(500, f"the token's audit entry could not be written: {exc}") from None
    log.info("token %s for %r made by %s", token.id, user, req.actor)
    return {
        "id": token.id,
        "token": secret,
        "user": token.user,
        "roles": None if token.roles is None else list(token.roles),
        "expires": token.expires,
    }


def _create_recorded(
    state_dir: Path,
    user: str,
    roles: list[str] | None,
    lifetime: float | None,
    actor: str | None,
) -> tuple[str, Token]:
    """Make the token and append its audit entry (`token_create`, `token/<id>`)."""
    secret, token = create_token(state_dir, user, roles, lifetime, time.time())
    record(state_dir, "token_create", f"token/{token.id}", actor or "rapi:anonymous")
    return secret, token
