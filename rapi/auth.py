"""HTTP Basic authentication against the `rapi_users` file.

The file's format belongs to `client.rapi_users` (`lw rapi-user` writes it); this module
reads it, rereads it whenever it changes (mtime, size or inode), and checks credentials.
scrypt is deliberately slow, so checks run in a worker thread and a successful check is
remembered (keyed by an HMAC with a per-process random key, never the password itself)
until the file changes.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
import logging
import os
import secrets
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from client.rapi_users import User, parse_users, verify_password

log = logging.getLogger(__name__)

REALM = "Lockwarden RAPI"
_CACHE_LIMIT = 1024


class Verdict(Enum):
    """The outcome of an access check."""

    OK = "ok"
    UNAUTHENTICATED = "unauthenticated"  # 401: no or wrong credentials
    FORBIDDEN = "forbidden"  # 403: a valid user without the right


@dataclass(frozen=True)
class Credentials:
    """What an Authorization: Basic header carries."""

    name: str
    password: str


def parse_basic(header: str | None) -> Credentials | None:
    """The credentials of a Basic Authorization header; None if absent or malformed."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    name, sep, password = decoded.partition(":")
    return Credentials(name, password) if sep else None


class UsersFile:
    """The users file, reread when it changes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int, int] | None = None
        self._users: dict[str, User] = {}
        self._verified: set[bytes] = set()
        self._key = secrets.token_bytes(32)

    def users(self) -> dict[str, User]:
        """The current users (the file is stat'ed on every call, read when it changed)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._stamp is not None or self._users:
                log.warning("users file %s is gone: no RAPI user can log in", self.path)
            self._stamp, self._users = None, {}
            self._verified.clear()
            return self._users
        except OSError as exc:
            log.error("cannot stat users file %s: %s; refusing all users", self.path, exc)
            self._stamp, self._users = None, {}
            return self._users
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._load(stamp)
        return self._users

    def _load(self, stamp: tuple[int, int, int]) -> None:
        try:
            text = self.path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            log.error("cannot read users file %s: %s; refusing all users", self.path, exc)
            self._users = {}
        else:
            self._users, problems = parse_users(text)
            for problem in problems:
                log.warning("users file %s: %s", self.path, problem)
            log.info("read %d RAPI user(s) from %s", len(self._users), self.path)
        self._stamp = stamp
        self._verified.clear()

    def _cache_key(self, user: User, password: str) -> bytes:
        message = f"{user.name}\0{user.secret}\0{password}".encode()
        return hmac.new(self._key, message, hashlib.sha256).digest()

    async def check(self, creds: Credentials) -> User | None:
        """The user if the name and password are right, else None."""
        user = self.users().get(creds.name)
        if user is None:
            return None
        key = self._cache_key(user, creds.password)
        if key in self._verified:
            return user
        if not await asyncio.to_thread(verify_password, user.secret, creds.password):
            return None
        if len(self._verified) >= _CACHE_LIMIT:
            self._verified.clear()
        self._verified.add(key)
        return user


class Authorizer:
    """Decides each request: reads need a valid user (unless anonymous reads are allowed),
    writes a user with `write`.  Refusals are logged."""

    def __init__(self, users: UsersFile, *, allow_anonymous_read: bool) -> None:
        self.users = users
        self.allow_anonymous_read = allow_anonymous_read

    async def decide(self, header: str | None, *, write: bool, what: str, peer: str) -> Verdict:
        """The verdict for a request needing read (or `write`) access."""
        creds = parse_basic(header)
        if creds is None:
            if header is None and not write and self.allow_anonymous_read:
                return Verdict.OK
            log.warning(
                "%s from %s: %s; 401",
                what,
                peer,
                "no credentials" if header is None else "malformed Authorization header",
            )
            return Verdict.UNAUTHENTICATED
        user = await self.users.check(creds)
        if user is None:
            log.warning(
                "%s from %s: wrong user name or password for %r; 401", what, peer, creds.name
            )
            return Verdict.UNAUTHENTICATED
        if write and not user.write:
            log.warning("%s from %s: user %r has no write access; 403", what, peer, user.name)
            return Verdict.FORBIDDEN
        return Verdict.OK
