"""`GET /2/audit` (role audit): the audit log (docs/contracts.md#audit-log) of both
daemons and of lw-rapi's own file (RAPI user and token changes), merged by time, newest
last.  `?since=&until=` are epoch seconds (`since <= ts < until`), `actor` and `target`
match exactly, `limit` keeps the newest (default 1000)."""

from __future__ import annotations

import asyncio
import math
from collections.abc import Mapping

import msgspec

from client import audit_file
from client.audit import DEFAULT_LIMIT, MAX_LIMIT, AuditEntry, Query, merged
from rapi.routing import HttpError, Request


def parse_query(args: Mapping[str, str]) -> Query:
    """The query the request's arguments ask for; ValueError naming a bad one (an empty
    argument counts as absent)."""
    since, until = _time(args, "since"), _time(args, "until")
    limit = DEFAULT_LIMIT
    if text := args.get("limit"):
        try:
            limit = int(text)
        except ValueError:
            limit = -1
        if not 0 <= limit <= MAX_LIMIT:
            raise ValueError(f"'limit' must be an integer from 0 to {MAX_LIMIT}, got {text!r}")
    return Query(since, until, args.get("actor") or None, args.get("target") or None, limit)


def _time(args: Mapping[str, str], name: str) -> float | None:
    """A time argument in epoch seconds (None if absent)."""
    text = args.get(name)
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise ValueError(f"'{name}' must be a time in seconds since the epoch, got {text!r}")
    return value


async def get_audit(req: Request) -> list[AuditEntry]:
    """Both daemons' entries and lw-rapi's own, merged by `ts`, the newest `limit`."""
    try:
        query = parse_query(req.query)
    except ValueError as exc:
        raise HttpError(400, str(exc)) from None
    asked = msgspec.structs.asdict(query)
    luxid, wconfd, own = await asyncio.gather(
        req.backend.luxi.query_audit(**asked),
        req.backend.wconfd.query_audit(**asked),
        asyncio.to_thread(audit_file.read, req.settings.state_dir, query),
    )
    return merged([luxid, wconfd, own], query.limit)
