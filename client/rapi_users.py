"""The RAPI users file (docs/contracts.md#rapi-paths): its format, and how to read and edit it.

`rapi_users` in the state directory holds one user a line::

    NAME {SCRYPT}N$r$p$SALT$KEY [ROLE[,ROLE...]]

SALT and KEY are base64; KEY is ``hashlib.scrypt(password, salt=SALT, n=N, r=r, p=p)``.
Passwords are never stored.  Blank lines and ``#`` comments are kept as they are; lines in
any other form are ignored (and reported) by the reader.  The third field lists the user's
roles (docs/operations.md#rapi-users-roles-and-tokens): every valid user may read; `jobs`,
`filters`, `drains`, `instances`, `audit` and `admin` add rights, and `write` (Ganeti's
option, kept) is every role but `audit` and `admin`.  Ganeti's `read` option is accepted
and grants nothing more.

This module is the single definition of the format, public so both sides use it:
`lw rapi-user` (client.cli.rapi_users) edits the file (`edit_lines`) and `lw-rapi`
reads it (`parse_users`, `verify_password`).
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import hmac
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from client.names import CLIENT_NAME_RE

USERS_FILE = "rapi_users"
SCHEME = "{SCRYPT}"
# scrypt cost for new hashes: 16 MiB of memory, some tens of ms per check.
SCRYPT_N, SCRYPT_R, SCRYPT_P = 2**14, 8, 1
_KEY_BYTES = 32
_SALT_BYTES = 16
# Upper bounds on what a users file may ask for (a tampered file must not exhaust memory).
_MAX_N, _MAX_R, _MAX_P = 2**20, 32, 16
NAME_RE = CLIENT_NAME_RE  # a user's name follows the client-name rule (no trailing newline)


# The roles, narrowest first; `write` and `admin` are unions of others.
ROLES = ("jobs", "filters", "drains", "instances", "audit", "admin", "write")
WRITE_ROLES = frozenset({"jobs", "filters", "drains", "instances"})


@dataclass(frozen=True)
class User:
    """One RAPI user: name, password hash (`{SCRYPT}…`), and the roles of its line."""

    name: str
    secret: str
    roles: frozenset[str] = frozenset()


def rights(roles: frozenset[str] | set[str] | tuple[str, ...]) -> frozenset[str]:
    """Every role `roles` amount to: `admin` is all of them, `write` the four write roles."""
    granted = set(roles)
    if "admin" in granted:
        granted.update(ROLES)
    if "write" in granted:
        granted |= WRITE_ROLES
    return frozenset(granted)


def parse_roles(text: str) -> frozenset[str]:
    """The roles of a comma-separated list (`jobs,filters`); ValueError naming an unknown
    one.  Empty parts are skipped, so an empty text means no role."""
    roles = {part.strip().lower() for part in text.split(",") if part.strip()}
    unknown = roles - set(ROLES)
    if unknown:
        raise ValueError(
            f"unknown role(s) {', '.join(sorted(unknown))} (roles: {', '.join(ROLES)})"
        )
    return frozenset(roles)


def format_roles(roles: frozenset[str] | tuple[str, ...]) -> str:
    """Roles in the file's (and listings') order: `jobs,filters`."""
    return ",".join(role for role in ROLES if role in roles)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode().rstrip("=")


def _unb64(text: str) -> bytes:
    return base64.b64decode(text + "=" * (-len(text) % 4), validate=True)


def hash_password(password: str) -> str:
    """A new `{SCRYPT}…` hash of `password` with a random salt."""
    salt = secrets.token_bytes(_SALT_BYTES)
    key = _scrypt(password, salt, SCRYPT_N, SCRYPT_R, SCRYPT_P, _KEY_BYTES)
    return f"{SCHEME}{SCRYPT_N}${SCRYPT_R}${SCRYPT_P}${_b64(salt)}${_b64(key)}"


def _scrypt(password: str, salt: bytes, n: int, r: int, p: int, dklen: int) -> bytes:
    return hashlib.scrypt(
        password.encode(), salt=salt, n=n, r=r, p=p, maxmem=256 * n * r * p + 2**20, dklen=dklen
    )


def _parse_secret(secret: str) -> tuple[int, int, int, bytes, bytes]:
    """(n, r, p, salt, key) of a `{SCRYPT}` hash; ValueError if malformed or too costly."""
    if not secret.startswith(SCHEME):
        raise ValueError("not a {SCRYPT} hash")
    parts = secret[len(SCHEME) :].split("$")
    if len(parts) != 5:
        raise ValueError("expected {SCRYPT}N$r$p$SALT$KEY")
    n, r, p = (int(x) for x in parts[:3])
    if not (1 < n <= _MAX_N and n & (n - 1) == 0 and 0 < r <= _MAX_R and 0 < p <= _MAX_P):
        raise ValueError(f"scrypt parameters out of range: N={n} r={r} p={p}")
    salt, key = _unb64(parts[3]), _unb64(parts[4])
    if not salt or len(key) < 16:
        raise ValueError("salt or key too short")
    return n, r, p, salt, key


def verify_password(secret: str, password: str) -> bool:
    """Whether `password` matches the `{SCRYPT}` hash (constant-time compare)."""
    try:
        n, r, p, salt, key = _parse_secret(secret)
    except ValueError:
        return False
    return hmac.compare_digest(_scrypt(password, salt, n, r, p, len(key)), key)


def parse_line(line: str) -> User | None:
    """The user on one line, None for blank and comment lines; ValueError if malformed."""
    text = line.strip()
    if not text or text.startswith("#"):
        return None
    fields = text.split()
    if len(fields) not in (2, 3):
        raise ValueError("expected NAME {SCRYPT}HASH [ROLE[,ROLE...]]")
    name, secret = fields[0], fields[1]
    if not NAME_RE.match(name):
        raise ValueError(f"bad user name {name!r}")
    _parse_secret(secret)
    options = fields[2] if len(fields) == 3 else ""
    # Ganeti's `read` option means a valid user, which every user is.
    kept = ",".join(o for o in options.split(",") if o.strip().lower() != "read")
    return User(name, secret, parse_roles(kept))


def parse_users(text: str) -> tuple[dict[str, User], list[str]]:
    """The users of a file's text, and one message per line that was ignored."""
    users: dict[str, User] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        try:
            user = parse_line(line)
        except ValueError as exc:
            problems.append(f"line {number}: {exc}; line ignored")
            continue
        if user is not None:
            users[user.name] = user
    return users, problems


def format_user(user: User) -> str:
    """The line of a user."""
    roles = format_roles(user.roles)
    return f"{user.name} {user.secret}" + (f" {roles}" if roles else "")


def users_path(state_dir: Path) -> Path:
    """Where the users file lives."""
    return state_dir / USERS_FILE


@contextlib.contextmanager
def edit_lines(path: Path) -> Iterator[list[str]]:
    """The file's lines (the users file, or the tokens file), under an exclusive lock; what
    the block leaves in the list is written back atomically and durably (mode 0600, the
    directory fsync'd after the rename).  Run by root, the files get the directory's owner,
    so lw-rapi (its own user under systemd) still reads and writes them."""
    import fcntl

    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock_fd = os.open(
        path.with_name(path.name + ".lock"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600
    )
    owned_like_directory(lock_fd, path.parent)
    with os.fdopen(lock_fd, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            lines = path.read_text().splitlines()
        except FileNotFoundError:
            lines = []
        before = list(lines)
        yield lines
        if lines != before:
            tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            owned_like_directory(fd, path.parent)
            with os.fdopen(fd, "w") as out:
                out.write("".join(f"{line}\n" for line in lines))
                out.flush()
                os.fsync(out.fileno())
            os.replace(tmp, path)
            dir_fd = os.open(path.parent, os.O_RDONLY)
            try:
                os.fsync(dir_fd)
            finally:
                os.close(dir_fd)


def owned_like_directory(fd: int, directory: Path) -> None:
    """Give a file root creates the owner of its directory (nothing for other users)."""
    if os.geteuid() == 0:
        st = os.stat(directory)
        os.fchown(fd, st.st_uid, st.st_gid)


def user_line(lines: list[str], name: str) -> int | None:
    """The index of the user's line (comments and blank lines never match)."""
    for index, line in enumerate(lines):
        fields = line.split()
        if fields and fields[0] == name:
            return index
    return None
