"""The event log's event-driven wait (client._server.event_log, docs/contracts.md#events):
a waiting watch_events call wakes when an event is published, not before its timeout
otherwise; a follower that comes back right after an answer waits for the next step
instead of getting events one by one; `lock` is wanted only while (and shortly after)
someone asks for it.
"""

from __future__ import annotations

import asyncio
import time

import msgspec

from client._server import event_log
from client._server.event_log import EventLog
from client.api.common import EventBatch
from client.events import _OLDER_SCAN, EventRing, Retention, new_event, numbered


def draft(topic: str = "job") -> list:
    return [new_event("luxid", topic, "status", "job/1", {}, time.time())]  # type: ignore[arg-type]


def decoded(batch: object) -> EventBatch:
    return msgspec.json.decode(msgspec.json.encode(batch), type=EventBatch)


def test_a_waiter_wakes_on_an_event_and_times_out_without() -> None:
    async def main() -> None:
        log = EventLog("luxid", EventRing())
        started = time.monotonic()
        quiet = decoded(await log.watch(0, None, 0.05, 10))
        assert quiet.events == [] and time.monotonic() - started >= 0.045
        waiter = asyncio.ensure_future(log.watch(0, None, 5, 10))
        await asyncio.sleep(0.01)
        assert not waiter.done()
        log.publish(numbered(draft(), 1))
        batch = decoded(await asyncio.wait_for(waiter, 1))
        assert [e.index for e in batch.events] == [1] and batch.last == 1

    asyncio.run(main())


def test_followers_get_one_answer_per_step() -> None:
    async def main() -> None:
        log = EventLog("luxid", EventRing())
        answers = [0] * 50

        async def follow(i: int) -> None:
            after = 0
            while after < 200:
                after = decoded(await log.watch(after, None, 5, 1000)).last
                answers[i] += 1

        followers = [asyncio.ensure_future(follow(i)) for i in range(50)]
        await asyncio.sleep(0.01)
        for index in range(1, 201):  # 200 events, one a millisecond
            log.publish(numbered(draft(), index))
            await asyncio.sleep(0.001)
        await asyncio.wait_for(asyncio.gather(*followers), 5)
        interval = min(event_log.MAX_WAKE_INTERVAL, event_log.WAKE_COST_PER_WAITER * 50)
        assert max(answers) <= 0.2 / interval * 3 + 3, answers  # far fewer than 200 each

    asyncio.run(main())


def test_followers_at_one_cursor_share_one_encoded_answer_per_step() -> None:
    async def main() -> None:
        log = EventLog("luxid", EventRing())
        waiting = [asyncio.ensure_future(log.watch(0, None, 5, 1000)) for _ in range(3)]
        await asyncio.sleep(0.01)
        log.publish(numbered(draft() + draft(), 1))
        answers = await asyncio.wait_for(asyncio.gather(*waiting), 1)
        assert answers[0] is answers[1] is answers[2]  # read and encoded once
        assert [e.index for e in decoded(answers[0]).events] == [1, 2]
        other = await log.watch(0, None, 5, 1)  # another limit: an answer of its own
        assert [e.index for e in decoded(other).events] == [1]
        # The next step shows the new events: a late follower at cursor 0 gets them all.
        log.publish(numbered(draft(), 3))
        await asyncio.sleep(event_log.MAX_WAKE_INTERVAL + 0.01)
        late = decoded(await log.watch(0, None, 5, 1000))
        assert [e.index for e in late.events] == [1, 2, 3] and late.last == 3

    asyncio.run(main())


def test_lock_is_wanted_while_and_shortly_after_someone_asks() -> None:
    async def main() -> None:
        log = EventLog("wconfd", EventRing())
        assert not log.lock_wanted
        await log.watch(0, ["config"], 0, 10)
        assert not log.lock_wanted
        waiter = asyncio.ensure_future(log.watch(0, ["lock"], 5, 10))
        await asyncio.sleep(0)
        assert log.lock_wanted
        waiter.cancel()
        await asyncio.gather(waiter, return_exceptions=True)
        assert log.lock_wanted  # for LOCK_INTEREST s after the last call
        log._lock_seen -= event_log.LOCK_INTEREST + 1
        assert not log.lock_wanted

    asyncio.run(main())


def test_a_rare_topic_far_back_in_the_store_is_answered_at_once() -> None:
    """A ring that spilled to its store reads it in bounded scans (client.events): a
    follower of a topic found only past many of them still gets it in one call, without
    waiting for a new event."""
    events = numbered(draft() * (3 * _OLDER_SCAN) + draft("drain"), 1)
    rows = [msgspec.json.encode(e) for e in events]

    def older(after: int, upto: int, limit: int) -> tuple[int, list[bytes]]:
        return 0, rows[after:upto][:limit]

    async def main() -> None:
        ring = EventRing(Retention(10, 10**9), older=older)
        ring.extend(events)
        log = EventLog("luxid", ring)
        started = time.monotonic()
        batch = decoded(await log.watch(0, ["drain"], 5, 10))
        assert [e.topic for e in batch.events] == ["drain"] and not batch.gap
        assert time.monotonic() - started < 2

    asyncio.run(main())
