"""The dashboard's data: one snapshot from both daemons, and a server-sent-event stream
that pushes a fresh snapshot when something changed.

Changes are learnt from the event-driven waits the daemons offer, not from a timer that
re-reads everything:

- wconfd's `wait_config_change(since_serial)` — nodes, instances, filters, drains;
- luxid's `wait_for_job_change` on each active (waiting, running, canceling) job, up to
  `MAX_WATCHED` of them — status, opcode statuses, pending reason, priority.

luxid has no queue-level change wait yet, so a job submitted to an otherwise unchanged
queue is noticed when those waits time out (`QUEUE_CHECK_SECONDS`): the stream then asks
`query_queue_info` alone (a few counters) and re-reads the rest only if they moved.
A push is at most every `MIN_PUSH_SECONDS`, so a busy queue is coalesced, not streamed.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import msgspec
from aiohttp import web

from client import AsyncLuxiClient, AsyncWConfdClient, errors
from rapi.dashboard.view import (
    ACTIVE,
    FILTER_FIELDS,
    INDEX_FIELDS,
    JOB_FIELDS,
    build_view,
    detail_ids,
    queue_mark,
)

log = logging.getLogger(__name__)

QUEUE_CHECK_SECONDS = 1.0
MIN_PUSH_SECONDS = 0.2
MAX_WATCHED = 32
_WATCH_FIELDS = ["status", "opstatus", "pending_reason", "priority"]  # all in JOB_FIELDS
_NO_LOG = 2**62  # wait_for_job_change's prev_log_serial: ignore log entries
_encoder = msgspec.json.Encoder()


async def snapshot(luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient) -> dict[str, Any]:
    """Everything the page shows, asked of both daemons at once."""
    config, info, index, filters, locks = await asyncio.gather(
        wconfd.get_config(),
        luxi.query_queue_info(),
        luxi.query_jobs(ids=None, fields=list(INDEX_FIELDS)),
        luxi.query_filters(fields=list(FILTER_FIELDS)),
        wconfd.list_all_locks(),
    )
    ids = detail_ids(index)
    details = await luxi.query_jobs(ids=ids, fields=list(JOB_FIELDS)) if ids else []
    return build_view(
        config, msgspec.to_builtins(info), index, details, filters, msgspec.to_builtins(locks)
    )


async def _job_changed(luxi: AsyncLuxiClient, job: dict[str, Any], timeout: float) -> bool:
    prev = [job[f] for f in _WATCH_FIELDS]
    answer = await luxi.wait_for_job_change(
        job_id=job["id"], fields=_WATCH_FIELDS, prev_values=prev, prev_log_serial=_NO_LOG,
        timeout=timeout,
    )  # fmt: skip
    return answer != "nochange"


async def _config_changed(wconfd: AsyncWConfdClient, serial: int, timeout: float) -> bool:
    return bool(await wconfd.wait_config_change(since_serial=serial, timeout=timeout) > serial)


async def _first_true(waits: list[Any]) -> bool:
    """True as soon as one wait says True (the rest are withdrawn); False if none does."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        for next_done in asyncio.as_completed(tasks):
            try:
                if await next_done:
                    return True
            except errors.NotFound:  # a job archived meanwhile: that is a change
                return True
        return False
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def changed(luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient, view: dict[str, Any]) -> bool:
    """Whether something the view shows changes within QUEUE_CHECK_SECONDS (returns as
    soon as it does; see the module docstring)."""
    active = [job for job in view["active"] if job["status"] in ACTIVE][:MAX_WATCHED]
    waits = [_config_changed(wconfd, view["serial"], QUEUE_CHECK_SECONDS)]
    waits += [_job_changed(luxi, job, QUEUE_CHECK_SECONDS) for job in active]
    if await _first_true(waits):
        return True
    info = msgspec.to_builtins(await luxi.query_queue_info())
    return bool(queue_mark(info) != view["queue_mark"])


async def events(
    request: web.Request, luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient
) -> web.StreamResponse:
    """`GET /ui/events`: `snapshot` events, the first at once, then one per change."""
    response = web.StreamResponse(
        headers={
            "Content-Type": "text/event-stream",
            "Cache-Control": "no-cache",
            "X-Accel-Buffering": "no",
        }
    )
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        while True:
            started = loop.time()
            try:
                view = await snapshot(luxi, wconfd)
                await response.write(b"event: snapshot\ndata: " + _encoder.encode(view) + b"\n\n")
                while not await changed(luxi, wconfd, view):
                    await response.write(b": nothing changed\n\n")  # finds a gone reader
            except errors.RpcError as exc:
                log.warning("/ui/events: %s", exc)
                message = {"error": f"a daemon did not answer: {exc.message}"}
                await response.write(b"event: trouble\ndata: " + _encoder.encode(message) + b"\n\n")
                await asyncio.sleep(QUEUE_CHECK_SECONDS)
            await asyncio.sleep(max(0.0, MIN_PUSH_SECONDS - (loop.time() - started)))
    return response
