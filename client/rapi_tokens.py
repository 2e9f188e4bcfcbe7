"""RAPI bearer tokens (docs/operations.md#rapi-users-roles-and-tokens): the `rapi_tokens`
file beside `rapi_users`, and making, listing and revoking tokens.

A token is `lwt_` and 32 random bytes in base64url.  It is shown once, when made; the file
keeps only its SHA-256, one JSON object a line::

    {"id": "…", "user": "alice", "sha256": "…", "roles": ["jobs"] | null,
     "created": 1765000000.0, "expires": 1767592000.0 | null}

A token acts for its user with its roles ∩ the user's current roles (`roles` null: all of
the user's); it stops working when it expires, when its line is removed (revoked), or when
its user is removed.  Both `lw rapi-user token` and lw-rapi's `POST /2/tokens` make tokens
with `create_token`, so the rule "never more than the user's own roles" is checked once.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from pathlib import Path

import msgspec

from client.rapi_users import (
    User,
    edit_lines,
    format_roles,
    parse_roles,
    parse_users,
    rights,
    users_path,
)

TOKENS_FILE = "rapi_tokens"
PREFIX = "lwt_"
_SECRET_BYTES = 32
_ID_BYTES = 6


class Token(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One token as the file keeps it (its hash, never the token)."""

    id: str
    user: str
    sha256: str
    roles: tuple[str, ...] | None
    created: float
    expires: float | None


class TokenError(ValueError):
    """A token that cannot be made or revoked; the message says why."""


_decoder = msgspec.json.Decoder(Token)


def tokens_path(state_dir: Path) -> Path:
    """Where the tokens file lives (beside the users file)."""
    return state_dir / TOKENS_FILE


def hash_token(token: str) -> str:
    """The SHA-256 (hex) the file keeps for a token."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def token_rights(token: Token, user: User) -> frozenset[str]:
    """What a token may do: its roles ∩ its user's current roles (all of them if null)."""
    own = rights(user.roles)
    return own if token.roles is None else rights(token.roles) & own


def live(token: Token, now: float) -> bool:
    """Whether the token has not expired at `now`."""
    return token.expires is None or now < token.expires


def parse_tokens(text: str) -> tuple[dict[str, Token], list[str]]:
    """The tokens of a file's text by hash, and one message per line that was ignored."""
    tokens: dict[str, Token] = {}
    problems: list[str] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        try:
            token = _decoder.decode(line)
        except msgspec.DecodeError as exc:
            problems.append(f"line {number}: {exc}; line ignored")
            continue
        tokens[token.sha256] = token
    return tokens, problems


def read_tokens(state_dir: Path) -> tuple[dict[str, Token], list[str]]:
    """The tokens file's tokens (none if there is no file)."""
    try:
        text = tokens_path(state_dir).read_text()
    except FileNotFoundError:
        return {}, []
    return parse_tokens(text)


def _read_users(state_dir: Path) -> dict[str, User]:
    try:
        text = users_path(state_dir).read_text()
    except FileNotFoundError:
        return {}
    return parse_users(text)[0]


def create_token(
    state_dir: Path, user: str, roles: str | list[str] | None, lifetime: float | None, now: float
) -> tuple[str, Token]:
    """A new token for `user` (roles as `jobs,filters` or a list; None: the user's own;
    lifetime in seconds, None: no expiry), appended durably to the tokens file; the token
    (shown once) and its record.  TokenError if the user does not exist or lacks a role."""
    try:
        wanted = (
            None
            if roles is None
            else parse_roles(roles if isinstance(roles, str) else ",".join(roles))
        )
    except ValueError as exc:
        raise TokenError(str(exc)) from None
    owner = _read_users(state_dir).get(user)
    if owner is None:
        raise TokenError(f"no RAPI user {user!r} in {users_path(state_dir)}")
    if wanted is not None:
        lacking = wanted - rights(owner.roles)
        if lacking:
            raise TokenError(
                f"user {user} lacks role(s) {format_roles(tuple(sorted(lacking)))}: a token "
                "never has more rights than its user"
            )
    secret = PREFIX + base64.urlsafe_b64encode(secrets.token_bytes(_SECRET_BYTES)).decode().rstrip(
        "="
    )
    token = Token(
        id=secrets.token_hex(_ID_BYTES),
        user=user,
        sha256=hash_token(secret),
        roles=None if wanted is None else tuple(r for r in format_roles(wanted).split(",") if r),
        created=now,
        expires=None if lifetime is None else now + lifetime,
    )
    with edit_lines(tokens_path(state_dir)) as lines:
        lines.append(msgspec.json.encode(token).decode())
    return secret, token


def revoke_token(state_dir: Path, token_id: str) -> Token:
    """Remove the token with this id from the file (lw-rapi rereads it at once); TokenError
    if there is none."""
    path = tokens_path(state_dir)
    with edit_lines(path) as lines:
        for index, line in enumerate(lines):
            try:
                token = _decoder.decode(line)
            except msgspec.DecodeError:
                continue
            if token.id == token_id:
                del lines[index]
                return token
    raise TokenError(f"no token {token_id!r} in {path}")
