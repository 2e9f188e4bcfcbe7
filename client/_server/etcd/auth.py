"""etcd's own users: authenticate, carry the token, renew it when etcd says it expired
(docs/operations.md#etcd-over-tls).

`TokenAuth` holds the token of `--etcd-user` and sends it as etcd's gateway wants it
(`Authorization: <token>`). etcd's tokens expire (`simple` ones after `--auth-token-ttl`
of idleness, `jwt` ones at their `ttl`) and are refused after the auth store changed;
`expired` recognises those answers, and the client then authenticates again once and
repeats the call that met them (etcd refused it before applying it, so repeating cannot
apply it twice). Concurrent calls that meet the same expiry authenticate once: a renewal
counts as done for every caller that saw the token it replaced.

The password is read from `--etcd-password-file` for each authentication (a rotated file
is taken up without a restart) and is never stored, logged or put in a message.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

import msgspec

from client._server.etcd import wire
from client._server.etcd.errors import AccessRefused, EtcdUnavailable
from client._server.etcd.tls import where

log = logging.getLogger(__name__)

_UNAUTHENTICATED = 16
_EXPIRED = ("invalid auth token", "revision in header is old", "revision of auth store is old")
_BAD_PASSWORD = "authentication failed"
_NOT_ENABLED = "authentication is not enabled"

# POST `payload` to `endpoint + path` without a token: (HTTP status, body).
Post = Callable[[str, str, bytes], Awaitable[tuple[int, bytes]]]


class AuthenticateRequest(msgspec.Struct):
    name: str
    password: str


class AuthenticateResponse(msgspec.Struct):
    token: str = ""


def expired(status: int, error: wire.GatewayError) -> bool:
    """Whether an answer says the token is no longer good (get a new one and repeat)."""
    if status == 401 or error.code == _UNAUTHENTICATED:
        return True
    return any(text in error.message for text in _EXPIRED)


def _read_password(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as source:
            return source.readline().rstrip("\r\n")
    except OSError as exc:
        raise AccessRefused(
            f"--etcd-password-file {path}: cannot read it ({exc.strerror})"
        ) from None


class TokenAuth:
    """The token of one etcd user, shared by every call of one client."""

    def __init__(self, user: str, password_file: str) -> None:
        self.user = user
        self.password_file = password_file
        self.token: str | None = None  # None: not authenticated yet; "": auth is off
        self.renewals = 0  # how many tokens this client has obtained
        self._pending: asyncio.Future[None] | None = None  # the authentication under way

    def headers(self) -> dict[str, str]:
        return {"Authorization": self.token} if self.token else {}

    async def ensure(self, post: Post, endpoint: str) -> int:
        """Authenticate unless a token is held; the renewal count the caller's token has."""
        if self.token is None:
            await self.renew(post, endpoint, self.renewals)
        return self.renewals

    async def renew(self, post: Post, endpoint: str, seen: int) -> None:
        """Get a new token from `endpoint`, unless one newer than renewal `seen` exists.

        One authentication at a time, shared by every caller, and shielded from their
        time limits: a call whose budget runs out while etcd checks the password (bcrypt,
        a raft round) leaves it to finish, and the next attempt finds the new token
        instead of starting over. AccessRefused when etcd refuses the user or password;
        EtcdUnavailable when the member cannot authenticate now (the caller tries another)."""
        if self.renewals != seen and self.token is not None:
            return
        if self._pending is None:
            self._pending = asyncio.ensure_future(self._authenticate(post, endpoint))
            self._pending.add_done_callback(self._settled)
        await asyncio.shield(self._pending)

    def _settled(self, task: asyncio.Future[None]) -> None:
        self._pending = None
        if not task.cancelled():
            task.exception()  # retrieved: a caller that gave up never hears of it

    async def _authenticate(self, post: Post, endpoint: str) -> None:
        body = AuthenticateRequest(self.user, _read_password(self.password_file))
        status, raw = await post(endpoint, "/v3/auth/authenticate", msgspec.json.encode(body))
        del body
        if status == 200:
            self.token = wire.decode(raw, AuthenticateResponse).token
            self.renewals += 1
            log.debug("etcd user %r authenticated at %s (token %d)", self.user,
                      where(endpoint), self.renewals)  # fmt: skip
            return
        error = wire.gateway_error(raw, status)
        if _NOT_ENABLED in error.message:
            log.warning(
                "etcd at %s has authentication off: --etcd-user %r is not used",
                where(endpoint), self.user,
            )  # fmt: skip
            self.token = ""
            return
        if _BAD_PASSWORD in error.message or error.code == 3:
            raise AccessRefused(
                f"etcd at {where(endpoint)}: authentication failed for user {self.user}"
            )
        raise EtcdUnavailable(f"etcd at {where(endpoint)} cannot authenticate now: {error.message}")
