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
from hypothesis import given, settings
from hypothesis import strategies as st

from client._server import event_log
from client._server.event_log import EventLog
from client.api.common import EventBatch
from client.errors import InvalidParams
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


class FakeConnection:
    """What EventLog.follow pushes to: frames kept; `writable` set by the test, whose
    resume calls the on_writable callbacks as the server's Connection does."""

    def __init__(self) -> None:
        self.on_close: list = []
        self.on_writable: list = []
        self.frames: list[bytes] = []
        self.writable = True
        self.closed = False

    def push(self, frame: bytes) -> None:
        assert self.writable, "pushed while the peer had not read"
        self.frames.append(frame)

    def close(self) -> None:
        self.closed = True
        for callback in self.on_close:
            callback(self)

    def resume(self) -> None:
        self.writable = True
        for callback in list(self.on_writable):
            callback(self)

    def batches(self) -> list[EventBatch]:
        out = []
        for frame in self.frames:
            message = msgspec.json.decode(frame)
            assert message["method"] == "events" and "id" not in message
            out.append(msgspec.convert(message["params"], EventBatch))
        return out


TOPIC_CHOICES = ["job", "drain", "lock"]


@settings(max_examples=150, deadline=None)
@given(
    script=st.lists(
        st.one_of(
            st.lists(st.sampled_from(TOPIC_CHOICES), min_size=1, max_size=12),  # events
            st.sampled_from(["pause", "resume", "step"]),
        ),
        max_size=25,
    ),
    topics=st.sampled_from([None, ["job"], ["drain", "lock"]]),
    limit=st.integers(1, 5),
    keep=st.sampled_from([10**6, 8]),
)
def test_a_follower_gets_each_event_once_in_order_through_pauses(script, topics, limit, keep):
    """Whatever the events and however the follower stalls: after it reads again, it was
    pushed every kept event of its topics once, in order, in batches of at most `limit`,
    each starting after the last one's `last`; events dropped meanwhile come as `gap`."""

    async def main() -> None:
        ring = EventRing(Retention(keep, None))
        log = EventLog("luxid", ring)
        conn = FakeConnection()
        index = 0
        first = decoded(log.follow(conn, 0, topics, limit))
        published = []
        for step in script:
            if step == "pause":
                conn.writable = False
            elif step == "resume":
                conn.resume()
            elif step == "step":  # a step's interval (one follower: 0.4 ms) passes
                await asyncio.sleep(0.001)
            else:
                events = numbered([draft(t)[0] for t in step], index + 1)
                index += len(events)
                published += events
                log.publish(events)
        conn.resume()
        following = log._followers[conn]
        for _ in range(2000):  # until the step due and every catch-up have run
            if log._wake_due is None and following.cursor >= log._visible == ring.last:
                break
            await asyncio.sleep(0.001)
        wanted = event_log.DEFAULT_TOPICS if topics is None else set(topics)
        expected = [e.index for e in published if e.topic in wanted]
        batches = [first, *conn.batches()]
        got = [e.index for b in batches for e in b.events]
        cursor = 0
        for batch in batches:
            assert len(batch.events) <= limit
            assert all(e.index > cursor for e in batch.events)
            assert all(e.topic in wanted for e in batch.events)
            if batch.events:
                assert batch.last == batch.events[-1].index
            cursor = batch.last
        assert got == sorted(set(got))
        if not any(b.gap for b in batches):
            assert got == expected
        else:  # what was dropped before it was read is missing, and only that
            still_kept = {e.index for e in decoded(ring.read(0, wanted, 10**6)).events}
            assert still_kept <= set(got) <= set(expected)
        assert not expected or cursor >= expected[-1]
        conn.close()
        assert not log._followers

    asyncio.run(main())


def test_a_second_follow_on_a_connection_and_a_replaced_ring() -> None:
    async def main() -> None:
        log = EventLog("wconfd", EventRing())
        log.publish(numbered(draft() * 3, 1))
        conn = FakeConnection()
        log.follow(conn, 0, None, 10)
        try:
            log.follow(conn, 0, None, 10)
        except InvalidParams as exc:
            assert "another connection" in exc.message
        else:
            raise AssertionError("a second follow was taken")
        log.ring = EventRing()  # a new term whose ring is behind the follower's cursor
        assert conn.closed
        lock = FakeConnection()
        log.follow(lock, 0, ["lock"], 10)
        assert log.lock_wanted
        lock.close()
        log._lock_seen -= event_log.LOCK_INTEREST + 1
        assert not log.lock_wanted

    asyncio.run(main())
