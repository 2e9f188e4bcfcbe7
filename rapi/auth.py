"""Who a request is and what it may do (docs/operations.md#rapi-users-roles-and-tokens).

A request authenticates with HTTP Basic (a user of `rapi_users`) or `Authorization: Bearer`
(a token of `rapi_tokens`, acting for its user).  Every valid user may read; a route that
changes something names the role it needs (rapi.routes), and a user or token without it
gets 403.  Failed authentications are throttled per user name and per address
(rapi.throttle): the eleventh within a minute gets 429, even with the right password.
Each failure is logged once, with the address; untrusted strings are written with repr.
"""

from __future__ import annotations

import base64
import binascii
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from client.rapi_users import rights
from rapi.credentials import Credentials
from rapi.throttle import Throttle

log = logging.getLogger(__name__)

REALM = "Lockwarden RAPI"


class Verdict(Enum):
    """The outcome of an access check."""

    OK = "ok"
    UNAUTHENTICATED = "unauthenticated"  # 401: no or wrong credentials
    FORBIDDEN = "forbidden"  # 403: a valid user without the role
    THROTTLED = "throttled"  # 429: too many failures for this name or address


@dataclass(frozen=True)
class Decision:
    """An access check's verdict; who asked (None: anonymous), through which token, the
    role that was missing (403) or the seconds to wait (429)."""

    verdict: Verdict
    user: str | None = None
    token_id: str | None = None
    missing: str | None = None
    retry_after: int = 0

    @property
    def actor(self) -> str | None:
        """Who acts, as the record names it: `rapi:alice`, `rapi:alice/token:ID`."""
        if self.user is None:
            return None
        return f"rapi:{self.user}" + (f"/token:{self.token_id}" if self.token_id else "")


def parse_basic(header: str) -> tuple[str, str] | None:
    """The (name, password) of a Basic Authorization header; None if it is not one."""
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    name, sep, password = decoded.partition(":")
    return (name, password) if sep else None


def parse_bearer(header: str) -> str | None:
    """The token of a Bearer Authorization header; None if it is not one."""
    scheme, _, value = header.strip().partition(" ")
    return value.strip() if scheme.lower() == "bearer" and value.strip() else None


class Authorizer:
    """Decides each request: reads need a valid user (unless anonymous reads are allowed),
    writes the route's role."""

    def __init__(
        self,
        credentials: Credentials,
        *,
        allow_anonymous_read: bool,
        throttle: Throttle | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.credentials = credentials
        self.allow_anonymous_read = allow_anonymous_read
        self.throttle = throttle or Throttle()
        self.clock = clock

    async def decide(
        self, header: str | None, *, need: str | None, what: str, peer: str
    ) -> Decision:
        """The decision for a request needing role `need` (None: reading) from address
        `peer`; `what` names the request in the log."""
        if header is None:
            if need is None and self.allow_anonymous_read:
                return Decision(Verdict.OK)
            log.warning("%s from %s: no credentials; 401", what, peer)
            return Decision(Verdict.UNAUTHENTICATED)
        basic = parse_basic(header)
        keys: tuple[tuple[str, str], ...] = (("address", peer),)
        if basic is not None:
            keys = (("user", basic[0]), *keys)
        now = self.clock()
        wait = self.throttle.retry_after(keys, now)
        if wait is not None:
            # Not a failure, and the access log has it: no warning per refused attempt.
            log.debug("%s from %s: too many failed logins; 429 for %d s", what, peer, wait)
            return Decision(Verdict.THROTTLED, retry_after=wait)
        decision = await self._authenticate(header, basic, now)
        if decision is None:
            self.throttle.failed(keys, self.clock())
            why = (
                f"wrong user name or password for {basic[0]!r}"
                if basic is not None
                else "unknown, expired or revoked token"
                if parse_bearer(header) is not None
                else "malformed Authorization header"
            )
            log.warning("%s from %s: %s; 401", what, peer, why)
            return Decision(Verdict.UNAUTHENTICATED)
        user, token_id, granted = decision
        if need is not None and need not in granted:
            log.warning(
                "%s from %s: %s lacks role %s; 403",
                what,
                peer,
                f"user {user!r}" + (f" (token {token_id})" if token_id else ""),
                need,
            )
            return Decision(Verdict.FORBIDDEN, user, token_id, missing=need)
        return Decision(Verdict.OK, user, token_id)

    async def _authenticate(
        self, header: str, basic: tuple[str, str] | None, now: float
    ) -> tuple[str, str | None, frozenset[str]] | None:
        """(user, token id, rights) of valid credentials, else None."""
        if basic is not None:
            user = await self.credentials.check_password(*basic)
            return None if user is None else (user.name, None, rights(user.roles))
        secret = parse_bearer(header)
        found = None if secret is None else self.credentials.check_token(secret, now)
        if found is None:
            return None
        token, granted = found
        return token.user, token.id, granted
