"""The server's eager first step plus `_resume` behaves as a plain asyncio Task would."""

from __future__ import annotations

import asyncio

import pytest

from client._server.server import _resume


async def _start(coro):
    """Run the first step now; a task continues it if it waits (as the server does)."""
    try:
        waiting_on = coro.send(None)
    except StopIteration as done:
        return done.value, None
    return None, asyncio.get_running_loop().create_task(_resume(coro, waiting_on))


def test_finishing_at_once_needs_no_task():
    async def quick():
        return 42

    async def go():
        value, task = await _start(quick())
        assert (value, task) == (42, None)

    asyncio.run(go())


def test_waits_on_futures_events_sleeps_and_failures():
    seen = []

    async def work():
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        loop.call_later(0.02, event.set)
        await asyncio.wait_for(event.wait(), 1)
        await asyncio.sleep(0)
        failing = loop.create_future()
        loop.call_later(0.01, failing.set_exception, ValueError("x"))
        with pytest.raises(ValueError):
            await failing
        seen.append(await asyncio.shield(asyncio.sleep(0.01, "slept")))

    async def go():
        _, task = await _start(work())
        await task

    asyncio.run(go())
    assert seen == ["slept"]


def test_cancel_reaches_the_coroutine_at_its_await():
    cleaned = []

    async def waits_forever():
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            cleaned.append(True)
            raise

    async def go():
        _, task = await _start(waits_forever())
        await asyncio.sleep(0.01)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert cleaned == [True]
