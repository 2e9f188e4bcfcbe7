"""The dashboard's data: one snapshot from both daemons, and a server-sent-event stream
that pushes a fresh snapshot when something changed.

Changes are learnt from the daemons' event-driven waits, never from a timer:

- luxid's `wait_queue_change(serial)` — any job added, changed or archived, the drain flag;
- wconfd's `wait_config_change(serial)` — nodes, instances, filters, drains;
- wconfd's `wait_locks_change(serial)` — the lock table and its waiters.

Beside each queued job listed and each waiting job the page shows the first link of its
why_job chain (what holds it), asked of luxid for those jobs only.

A snapshot reads the three serials first and then the data, so a change made while it
reads bumps a serial past the one it holds and is pushed next: none is missed.  When
nothing changes for `KEEPALIVE_SECONDS` the stream sends a comment (which also finds a
reader that went away).  Pushes are coalesced: the next one comes at the earliest
`PUSH_COST_RATIO` times the last snapshot's duration later (and `MIN_PUSH_SECONDS`), so
however busy the queue, one open dashboard spends a bounded share of the daemons' time.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from typing import Any

import msgspec
from aiohttp import web

from client import AsyncLuxiClient, AsyncWConfdClient, errors
from client.api.why import WhyJob
from rapi.dashboard.view import (
    FILTER_FIELDS,
    JOB_FIELDS,
    MAX_QUEUED,
    MAX_RECENT,
    add_why,
    budget_view,
    build_view,
    detail_ids,
    why_ids,
)
from rapi.sse import STREAM_HEADERS

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 15.0
TROUBLE_RETRY_SECONDS = 1.0
MIN_PUSH_SECONDS = 0.2
PUSH_COST_RATIO = 5.0
_encoder = msgspec.json.Encoder()


async def snapshot(luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient) -> dict[str, Any]:
    """Everything the page shows, asked of both daemons at once, with the serials it was
    read at (`marks`: queue, locks; the config's serial is `serial`)."""
    marks = await asyncio.gather(
        luxi.wait_queue_change(since_serial=-1, timeout=0),
        wconfd.wait_locks_change(since_serial=-1, timeout=0),
    )
    config, info, overview, filters, locks, budgets = await asyncio.gather(
        wconfd.get_config(),
        luxi.query_queue_info(),
        luxi.query_queue_overview(queued=MAX_QUEUED, recent=MAX_RECENT),
        luxi.query_filters(fields=list(FILTER_FIELDS)),
        wconfd.list_all_locks(),
        luxi.query_budgets(),
    )
    chosen = msgspec.to_builtins(overview)
    ids = detail_ids(chosen)
    details = await luxi.query_jobs(ids=ids, fields=list(JOB_FIELDS)) if ids else []
    view = build_view(
        config, msgspec.to_builtins(info), chosen, details, filters, msgspec.to_builtins(locks)
    )
    view["budgets"] = budget_view(msgspec.to_builtins(budgets))
    add_why(view, await first_steps(luxi, why_ids(view)))
    view["marks"] = list(marks)
    return view


async def first_steps(luxi: AsyncLuxiClient, ids: list[int]) -> dict[int, str]:
    """The text of each job's first why_job Step (jobs with an empty chain, or that
    vanished or could not be explained meanwhile, are left out)."""
    answers = await asyncio.gather(
        *(luxi.why_job(job_id=job_id) for job_id in ids), return_exceptions=True
    )
    return {
        job_id: answer.chain[0].text
        for job_id, answer in zip(ids, answers, strict=True)
        if isinstance(answer, WhyJob) and answer.chain
    }


async def _first_true(waits: list[Any]) -> bool:
    """True as soon as one wait says True (the rest are withdrawn); False if none does."""
    tasks = [asyncio.ensure_future(w) for w in waits]
    try:
        for next_done in asyncio.as_completed(tasks):
            if await next_done:
                return True
        return False
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def _moved(wait: Any, since: int) -> bool:
    return bool(await wait(since_serial=since, timeout=KEEPALIVE_SECONDS) != since)


async def changed(luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient, view: dict[str, Any]) -> bool:
    """Whether something the view shows changes within KEEPALIVE_SECONDS (returns as soon
    as it does)."""
    queue, locks = view["marks"]
    config = view["serial"]
    return await _first_true(
        [
            _moved(luxi.wait_queue_change, queue),
            _moved(wconfd.wait_locks_change, locks),
            _config_changed(wconfd, config),
        ]
    )


async def _config_changed(wconfd: AsyncWConfdClient, serial: int) -> bool:
    return bool(
        await wconfd.wait_config_change(since_serial=serial, timeout=KEEPALIVE_SECONDS) > serial
    )


async def events(
    request: web.Request, luxi: AsyncLuxiClient, wconfd: AsyncWConfdClient
) -> web.StreamResponse:
    """`GET /ui/events`: `snapshot` events, the first at once, then one per change."""
    response = web.StreamResponse(headers=STREAM_HEADERS)
    await response.prepare(request)
    loop = asyncio.get_running_loop()
    with contextlib.suppress(ConnectionError, asyncio.CancelledError):
        while True:
            started = loop.time()
            try:
                view = await snapshot(luxi, wconfd)
                cost = loop.time() - started
                await response.write(b"event: snapshot\ndata: " + _encoder.encode(view) + b"\n\n")
                while not await changed(luxi, wconfd, view):
                    await response.write(b": nothing changed\n\n")  # finds a gone reader
            except errors.RpcError as exc:
                log.warning("/ui/events: %s", exc)
                message = {"error": f"a daemon did not answer: {exc.message}"}
                await response.write(b"event: trouble\ndata: " + _encoder.encode(message) + b"\n\n")
                await asyncio.sleep(TROUBLE_RETRY_SECONDS)
                continue
            gap = max(MIN_PUSH_SECONDS, PUSH_COST_RATIO * cost)
            await asyncio.sleep(max(0.0, gap - (loop.time() - started)))
    return response
