"""Property tests of the kept events and watch_events' answer over them (client.events,
docs/contracts.md#events): a subscriber that follows `last` sees every event of its topics
exactly once and in order, or a `gap` exactly when some were dropped; `last` is the index
of the last event returned, else the newest; `after` above the newest is InvalidParams;
the retention keeps at least `keep` events and everything younger than the age floor.
"""

from __future__ import annotations

from collections.abc import Collection

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.api.common import DEFAULT_TOPICS, TOPICS, Event, EventBatch
from client.errors import InvalidParams
from client.events import EventRing, Retention, new_event, numbered


def read(ring: EventRing, after: int, topics: Collection[str], limit: int) -> EventBatch:
    """The ring's answer as a stub decodes it (the daemon sends each event's kept JSON)."""
    wire = msgspec.json.encode(ring.read(after, topics, limit))
    return msgspec.json.decode(wire, type=EventBatch)


topic = st.sampled_from(TOPICS)


@st.composite
def histories(draw: st.DrawFn) -> list[Event]:
    """Numbered events: +1 indexes (a local store) or with holes (etcd), rising ts."""
    topics = draw(st.lists(topic, max_size=60))
    steps = draw(st.lists(st.integers(1, 3), min_size=len(topics), max_size=len(topics)))
    contiguous = draw(st.booleans())
    out, index, ts = [], 0, 1000.0
    for name, step in zip(topics, steps, strict=True):
        index += 1 if contiguous else step
        ts += step * 10
        out.append(Event(index, ts, "luxid", name, "status", f"job/{index}", {}))
    return out


def follow(ring: EventRing, after: int, topics: frozenset[str], limit: int) -> list[Event]:
    """What a subscriber following `last` from `after` collects (no gap expected)."""
    seen: list[Event] = []
    for _ in range(1000):
        batch = read(ring, after, topics, limit)
        assert not batch.gap
        seen += batch.events
        if not batch.events:
            assert batch.last == ring.last
            return seen
        assert batch.last == batch.events[-1].index
        after = batch.last
    raise AssertionError("no end")


@settings(max_examples=300, deadline=None)
@given(histories(), st.sets(topic), st.integers(1, 7))
def test_a_follower_sees_every_event_of_its_topics_once_in_order(events, topics, limit):
    ring = EventRing(Retention(10**6, None))
    ring.extend(events)
    seen = follow(ring, 0, frozenset(topics), limit)
    assert seen == [e for e in events if e.topic in topics]


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 20), st.integers(0, 80))
def test_a_gap_is_reported_exactly_when_events_after_after_were_dropped(events, keep, after):
    ring = EventRing(Retention(keep, None))
    ring.extend(events)
    kept = ring.kept()
    assert kept == events[-keep:] if events else kept == []
    dropped = events[: len(events) - len(kept)]
    if after > ring.last:
        with pytest.raises(InvalidParams):
            read(ring, after, DEFAULT_TOPICS, 10)
        return
    batch = read(ring, after, frozenset(TOPICS), 10**6)
    assert batch.gap == any(e.index > after for e in dropped)
    assert batch.events == [e for e in kept if e.index > after]


@settings(max_examples=200, deadline=None)
@given(histories(), st.integers(0, 10), st.floats(0, 200))
def test_the_age_floor_keeps_everything_young_and_at_least_keep(events, keep, min_age):
    ring = EventRing(Retention(keep, min_age))
    for event in events:  # one by one, as they come
        ring.extend([event])
    kept = ring.kept()
    if events:
        newest = events[-1].ts
        young = [e for e in events if newest - e.ts <= min_age]
        assert len(kept) >= min(keep, len(events))
        assert all(e in kept for e in young)
        assert kept == events[len(events) - len(kept) :]


class ListStore:
    """The store behind a ring that spills (client.events.OlderEvents): every event's JSON,
    the oldest `dropped` of them pruned."""

    def __init__(self, events: list[Event], dropped: int) -> None:
        self.rows = [(e.index, msgspec.json.encode(e)) for e in events[dropped:]]
        self.floor = events[dropped - 1].index if dropped else 0

    def older(self, after: int, upto: int, limit: int) -> tuple[int, list[bytes]]:
        return self.floor, [raw for i, raw in self.rows if after < i <= upto][:limit]


@settings(max_examples=300, deadline=None)
@given(histories(), st.integers(1, 10), st.sets(topic), st.integers(1, 7), st.data())
def test_a_ring_that_spills_to_its_store_answers_as_one_that_keeps_all(
    events, keep, topics, limit, data
):
    """With the age floor keeping everything, a ring holding only `keep` in memory answers
    every follower from its store as a ring holding all would; a gap only for events the
    store itself pruned."""
    dropped = data.draw(st.integers(0, len(events)))
    store = ListStore(events, dropped)
    ring = EventRing(Retention(keep, 10**9), older=store.older)
    for event in events:
        ring.extend([event])
    assert ring.kept() == events[-keep:] if events else ring.kept() == []
    after = data.draw(st.integers(0, ring.last))
    wanted = frozenset(topics)
    batch = read(ring, after, wanted, limit)
    lost = [e for e in events[:dropped] if e.index > after]
    assert batch.gap == (bool(lost) and after < ring.spilled)
    if batch.gap:
        return
    seen: list[Event] = []
    start = after
    for _ in range(1000):  # as event_log reads on: an answer of the store's part may stop short
        batch = read(ring, after, wanted, limit)
        assert not batch.gap
        seen += batch.events
        if batch.events:
            assert batch.last == batch.events[-1].index
        elif batch.last == ring.last:
            break
        assert batch.last > after
        after = batch.last
    assert seen == [e for e in events if e.index > start and e.topic in topics]


def test_the_newest_index_alone_and_after_too_big():
    ring = EventRing()
    ring.extend(numbered([new_event("wconfd", "config", "add", "node/n1", {}, 1.0)] * 3, 1))
    assert read(ring, 0, (), 1).last == 3  # no topics: only `last`
    assert read(ring, 3, DEFAULT_TOPICS, 5).events == []
    with pytest.raises(InvalidParams, match="above the newest event index"):
        read(ring, 4, DEFAULT_TOPICS, 5)
    with pytest.raises(ValueError):
        ring.extend(numbered([new_event("wconfd", "config", "add", "n", {}, 1.0)], 3))


def test_lock_is_not_a_default_topic():
    assert frozenset(TOPICS) - {"lock"} == DEFAULT_TOPICS


def test_events_kept_as_json_come_back_the_same():
    events = numbered(
        [new_event("wconfd", "lock", "granted", "node/n1", {"owner": "c"}, 2.5)] * 4, 7
    )
    ring = EventRing()
    ring.extend(events[:2])
    ring.extend_json(msgspec.json.encode(e) for e in events[2:])
    assert ring.kept() == events
    again = EventRing()
    again.extend_json(ring.kept_json())
    assert again.kept() == events and again.last == 10


def test_events_read_from_indented_json_are_kept_compact():
    """A pretty-printed snapshot's events come back one line each, byte for byte what the
    ring itself encodes (they go verbatim into one-line answers and the next snapshot)."""
    events = numbered([new_event("wconfd", "config", "add", "node/n1", {"serial": 1}, 2.5)], 1)
    ring = EventRing()
    ring.extend(events)
    again = EventRing()
    again.extend_json(msgspec.json.format(bytes(raw), indent=2) for raw in ring.kept_json())
    assert [bytes(raw) for raw in again.kept_json()] == [bytes(r) for r in ring.kept_json()]
    assert b"\n" not in bytes(again.kept_json()[0])


def test_set_last_only_moves_up_and_a_compacted_ring_reads_the_same():
    ring = EventRing(Retention(3, None))
    events = numbered([new_event("luxid", "job", "status", "job/1", {}, 1.0)] * 5000, 1)
    for chunk in range(0, 5000, 100):
        ring.extend(events[chunk : chunk + 100])
    assert [e.index for e in ring.kept()] == [4998, 4999, 5000]
    assert read(ring, 4997, DEFAULT_TOPICS, 10).events == events[-3:]
    assert read(ring, 10, DEFAULT_TOPICS, 10).gap
    ring.set_last(2)
    assert ring.last == 5000
