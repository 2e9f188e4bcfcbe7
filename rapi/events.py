"""`GET /2/events`: both daemons' events as Server-Sent Events (docs/contracts.md#events).

One follower per daemon follows it (`follow_events`: the daemon pushes each batch as it
comes, docs/contracts.md#following-events) and hands the batches to the one writer,
which writes each event with the cursor after it (rapi.sse): the cursor moves one event
at a time, so a client reconnecting with `Last-Event-ID` gets exactly what it had not got.
A daemon that no longer keeps what the client missed says `gap`, written before the
events that follow.  Without `Last-Event-ID` the stream starts at each daemon's newest
index, read before the headers are sent.  A comment every `KEEPALIVE_SECONDS` keeps an
idle connection open (and finds a reader that went away).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

from aiohttp import web

from client import errors
from client.api.common import EventBatch
from rapi.routing import HttpError, Request
from rapi.sse import (
    DAEMONS,
    KEEPALIVE,
    STREAM_HEADERS,
    Cursor,
    decode_cursor,
    event_frame,
    gap_frame,
    parse_topics,
)

log = logging.getLogger(__name__)

STREAMS: web.AppKey[set[asyncio.Task[Any]]] = web.AppKey("event_streams")

KEEPALIVE_SECONDS = 15.0
RETRY_SECONDS = 1.0
BATCH = 1000

Batch = tuple[str, int, EventBatch]  # daemon, the `after` asked with, the answer


async def get_events(req: Request) -> web.StreamResponse:
    """The stream (the route's handler; `req.raw` is aiohttp's request)."""
    raw: web.Request = req.raw
    try:
        topics = parse_topics(req.query.get("topics"))
        last_id = raw.headers.get("Last-Event-ID")
        start = decode_cursor(last_id) if last_id else None
    except ValueError as exc:
        raise HttpError(400, str(exc)) from None
    stubs = {"luxid": req.backend.luxi, "wconfd": req.backend.wconfd}
    if start is None:  # from now: each daemon's newest index (no topic: only `last`)
        newest = [(await stubs[d].watch_events(0, [], 0, 1)).last for d in DAEMONS]
        start = Cursor(*newest)
    response = web.StreamResponse(headers=STREAM_HEADERS)
    await response.prepare(raw)
    streams = raw.app[STREAMS]
    me = asyncio.current_task()
    assert me is not None
    streams.add(me)
    batches: asyncio.Queue[Batch] = asyncio.Queue(maxsize=4)
    followers = [
        asyncio.create_task(_follow(d, stubs[d], getattr(start, d), topics, batches))
        for d in DAEMONS
    ]
    try:
        with contextlib.suppress(ConnectionError, asyncio.CancelledError):
            await _write(response, start, batches)
    finally:
        streams.discard(me)
        for task in followers:
            task.cancel()
        await asyncio.gather(*followers, return_exceptions=True)
    return response


async def end_streams(app: web.Application) -> None:
    """On shutdown: end the open streams (they never end by themselves), so lw-rapi stops
    at once rather than after aiohttp's grace period."""
    streams = app[STREAMS]
    for task in list(streams):
        task.cancel()


async def _write(
    response: web.StreamResponse, cursor: Cursor, batches: asyncio.Queue[Batch]
) -> None:
    """Write what the followers hand over, one event (and cursor step) at a time."""
    while True:
        try:
            daemon, after, batch = await asyncio.wait_for(batches.get(), KEEPALIVE_SECONDS)
        except TimeoutError:
            await response.write(KEEPALIVE)
            continue
        out = []
        if batch.gap:
            if not batch.events:
                cursor = cursor.moved(daemon, batch.last)
            out.append(gap_frame(cursor, daemon, after))
        for event in batch.events:
            cursor = cursor.moved(daemon, event.index)
            out.append(event_frame(cursor, event))
        await response.write(b"".join(out))


async def _follow(
    daemon: str, stub: Any, after: int, topics: list[str] | None, out: asyncio.Queue[Batch]
) -> None:
    """Follow `daemon`'s events from `after` on, handing over every batch with news; when
    the daemon ends the follow (it stopped, or another node took over), follow again from
    the last `last`.  A full queue stops the reading, and so the daemon's pushes."""
    while True:
        try:
            async with stub.follow_events(after, topics, BATCH) as following:
                async for batch in following:
                    if batch.events or batch.gap:
                        await out.put((daemon, after, batch))
                    after = batch.last
        except errors.InvalidParams:
            # `after` is above what the daemon has (its state was replaced): go on from
            # its newest, saying that what lay between is gone.
            newest = (await stub.watch_events(0, [], 0, 1)).last
            await out.put((daemon, after, EventBatch(events=[], last=newest, gap=True)))
            after = newest
            continue
        except errors.RpcError as exc:
            log.warning("/2/events: %s did not answer: %s", daemon, exc.message)
        await asyncio.sleep(RETRY_SECONDS)
