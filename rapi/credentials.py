"""lw-rapi's view of the `rapi_users` and `rapi_tokens` files (client.rapi_users and
client.rapi_tokens define them; `lw rapi-user` writes them).

Each file is stat'ed on every check and reread when it changes (mtime, size or inode), so
a user removed or a token revoked is refused from the next request on.  scrypt is
deliberately slow, so password checks run in a worker thread, and a successful check is
remembered (keyed by an HMAC with a per-process random key, never the password itself)
until the users file changes.  An unknown user name is checked against a dummy hash of
the same cost, so the answer's timing does not tell which names exist.
"""

from __future__ import annotations

import asyncio
import hashlib
import hmac
import logging
import os
import secrets
from collections.abc import Callable
from pathlib import Path
from typing import Generic, TypeVar

from client.rapi_tokens import Token, hash_token, live, parse_tokens, token_rights, tokens_path
from client.rapi_users import User, hash_password, parse_users, users_path, verify_password

log = logging.getLogger(__name__)

_CACHE_LIMIT = 1024
T = TypeVar("T")


class WatchedFile(Generic[T]):
    """A file parsed into a mapping, reread whenever it changes; empty while it is missing
    or unreadable (logged)."""

    def __init__(
        self, path: Path, what: str, parse: Callable[[str], tuple[dict[str, T], list[str]]]
    ) -> None:
        self.path = path
        self.what = what
        self._parse = parse
        self._stamp: tuple[int, int, int] | None = None
        self.entries: dict[str, T] = {}
        self.changed = False  # set on each (re)load; the owner clears it

    def current(self) -> dict[str, T]:
        """The entries now (the file is stat'ed on every call, read when it changed)."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            if self._stamp is not None:
                log.warning("%s %s is gone: none is accepted", self.what, self.path)
            self._set(None, {})
            return self.entries
        except OSError as exc:
            log.error("cannot stat %s %s: %s; none is accepted", self.what, self.path, exc)
            self._set(None, {})
            return self.entries
        stamp = (st.st_mtime_ns, st.st_size, st.st_ino)
        if stamp != self._stamp:
            self._set(stamp, self._load())
        return self.entries

    def _load(self) -> dict[str, T]:
        try:
            text = self.path.read_text()
        except (OSError, UnicodeDecodeError) as exc:
            log.error("cannot read %s %s: %s; none is accepted", self.what, self.path, exc)
            return {}
        entries, problems = self._parse(text)
        for problem in problems:
            log.warning("%s %s: %s", self.what, self.path, problem)
        log.info("read %d entries of %s %s", len(entries), self.what, self.path)
        return entries

    def _set(self, stamp: tuple[int, int, int] | None, entries: dict[str, T]) -> None:
        if stamp != self._stamp or entries != self.entries:
            self.changed = True
        self._stamp, self.entries = stamp, entries


class Credentials:
    """The users and tokens of lw-rapi's state directory, and the checks against them."""

    def __init__(self, state_dir: Path) -> None:
        self.users = WatchedFile(users_path(state_dir), "users file", parse_users)
        self.tokens: WatchedFile[Token] = WatchedFile(
            tokens_path(state_dir), "tokens file", parse_tokens
        )
        self._verified: set[bytes] = set()
        self._key = secrets.token_bytes(32)
        # What an unknown name is checked against: as costly as a real user's hash.
        self._dummy = hash_password(secrets.token_urlsafe(16))

    def load(self) -> None:
        """Read both files now (start-up reports their problems at once)."""
        self.users.current()
        self.tokens.current()

    def _cache_key(self, user: User, password: str) -> bytes:
        message = f"{user.name}\0{user.secret}\0{password}".encode("utf-8", "surrogatepass")
        return hmac.new(self._key, message, hashlib.sha256).digest()

    async def check_password(self, name: str, password: str) -> User | None:
        """The user if the name and password are right, else None (after the same scrypt
        work whether or not the name exists)."""
        users = self.users.current()
        if self.users.changed:
            self.users.changed = False
            self._verified.clear()
        user = users.get(name)
        if user is None:
            await asyncio.to_thread(verify_password, self._dummy, password)
            return None
        key = self._cache_key(user, password)
        if key in self._verified:
            return user
        if not await asyncio.to_thread(verify_password, user.secret, password):
            return None
        if len(self._verified) >= _CACHE_LIMIT:
            self._verified.clear()
        self._verified.add(key)
        return user

    def check_token(self, secret: str, now: float) -> tuple[Token, frozenset[str]] | None:
        """The token and its rights if it is known, unexpired and its user still exists."""
        token = self.tokens.current().get(hash_token(secret))
        if token is None or not live(token, now):
            return None
        user = self.users.current().get(token.user)
        if user is None:
            return None
        return token, token_rights(token, user)
