"""`POST /2/tokens` (role admin): a bearer token for a user, made the way `lw rapi-user
token` makes it (client.rapi_tokens.create_token), in lw-rapi's own state directory."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from client.durations import parse_duration
from client.rapi_tokens import TokenError, create_token
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
            create_token, req.settings.state_dir, user, roles, lifetime, time.time()
        )
    except (TokenError, ValueError) as exc:
        raise HttpError(400, str(exc)) from None
    log.info("token %s for %r made by %s", token.id, user, req.actor)
    return {
        "id": token.id,
        "token": secret,
        "user": token.user,
        "roles": None if token.roles is None else list(token.roles),
        "expires": token.expires,
    }
