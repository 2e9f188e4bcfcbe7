"""The events a daemon keeps, and the answer to watch_events over them: pure, no I/O
(shared by both daemons, whose pure cores may not import client._server).

Both daemons keep their recent events in one `EventRing` (docs/contracts.md#events):
appended in index order once durable, dropped from the old end by the retention rule,
read by index.  The shell (client._server.event_log) wakes waiters; the stores decide the
indexes (luxid's job store, wconfd's journal) and hand the ring events already numbered.

Retention: an event is dropped only when more than `keep` newer ones are kept AND (with
the default `min_age`) it is older than `min_age` seconds than the newest one - at least
the last 100,000 and at least 10 minutes' worth.  `--event-retention N` sets `keep` and
turns the age floor off, so tests can see a gap without waiting 10 minutes.  Ages are
compared with the events' own timestamps, never the clock, so replaying the same events
keeps the same ones.

A gap: events after `after` existed that are no longer kept.  `pruned` is the highest
index ever dropped (or known not kept at load), so `after < pruned` is exactly that.

Memory: a ring given `older` (luxid's SQLite store) holds at most `keep` events in memory;
the age floor's extra (events beyond `keep` but younger than `min_age`, which a burst of
jobs makes unbounded: a million jobs in ten minutes) stays in the store, which prunes by
the same rule, and a read below `spilled` asks the store for them through `older`.  The
ring does no I/O of its own.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Collection, Iterable
from typing import Any, Final, NamedTuple

import msgspec

from client.api.common import Event, Topic
from client.errors import InvalidParams

EVENT_SLOTS: Final = 1 << 16
"""On etcd an event's index is revision x EVENT_SLOTS + its place among the events of
that revision (more than one transaction can hold), so indexes follow the revisions."""
DEFAULT_KEEP: Final = 100_000
DEFAULT_MIN_AGE: Final = 600.0
# Dropped events are removed from the list in chunks (a list's front is costly to pop).
_COMPACT_AT: Final = 1024


def new_event(
    daemon: str, topic: Topic, action: str, key: str, data: dict[str, Any], ts: float
) -> Event:
    """An event not numbered yet (index 0): the store numbers it when it makes it durable
    (`numbered`)."""
    return Event(index=0, ts=ts, daemon=daemon, topic=topic, action=action, key=key, data=data)


def numbered(drafts: Iterable[Event], first: int) -> list[Event]:
    """The drafts numbered `first`, `first + 1`, ... in order."""
    return [
        Event(first + i, e.ts, e.daemon, e.topic, e.action, e.key, e.data)
        for i, e in enumerate(drafts)
    ]


class Retention:
    """How many events are kept at least, and for how long at least (None: no floor)."""

    __slots__ = ("keep", "min_age")

    def __init__(self, keep: int = DEFAULT_KEEP, min_age: float | None = DEFAULT_MIN_AGE) -> None:
        self.keep = max(0, keep)
        self.min_age = min_age

    @classmethod
    def from_option(cls, count: int | None) -> Retention:
        """`--event-retention N` (None: the default rule)."""
        return cls() if count is None else cls(count, None)

    def drops(self, oldest: Event, newest: Event, kept: int) -> bool:
        """Whether `oldest` goes, `kept` events being kept with `newest` the last."""
        return self.drops_at(oldest.ts, newest.ts, kept)

    def drops_at(self, oldest_ts: float, newest_ts: float, kept: int) -> bool:
        """`drops` by the two events' timestamps."""
        if kept <= self.keep:
            return False
        return self.min_age is None or newest_ts - oldest_ts > self.min_age


class _Kept(NamedTuple):
    """One kept event: what reading and pruning look at, and its JSON, encoded once."""

    number: int  # the event's index (`index` is tuple's own method)
    ts: float
    topic: str
    json: msgspec.Raw


class _Head(msgspec.Struct):
    """The fields of an Event's JSON the ring needs (decoding the rest is skipped)."""

    index: int
    ts: float
    topic: str


class RawBatch(msgspec.Struct):
    """watch_events' answer as the daemon sends it: the kept JSON of each event (encoded
    once, however many followers get it); a stub decodes it as client.api.common's
    EventBatch."""

    events: list[msgspec.Raw]
    last: int
    gap: bool


_encoder = msgspec.json.Encoder()
_head = msgspec.json.Decoder(_Head)
_events = msgspec.json.Decoder(list[Event])

OlderEvents = Callable[[int, int, int], tuple[int, list[bytes]]]
"""A store's kept events, for a ring that holds only the newest in memory: (after, upto,
limit) -> (the highest index the store no longer keeps, the compact JSON of up to `limit`
kept events with after < index <= upto, in index order)."""
_OLDER_SCAN: Final = 5000  # rows read from the store per call, at most


class EventRing:
    """Kept events by index, the newest index ever, the highest index dropped.

    Each event is kept as its JSON (encoded when it is added): a few hundred bytes, not a
    Struct and its dict, and nothing to encode again per follower."""

    __slots__ = (
        "_events", "_indexes", "_older", "_raws", "_start", "_topics", "last", "pruned",
        "retention", "spilled",
    )  # fmt: skip

    def __init__(
        self,
        retention: Retention | None = None,
        *,
        last: int = 0,
        pruned: int = 0,
        older: OlderEvents | None = None,
    ) -> None:
        self.retention = retention or Retention()
        self._older = older
        self.spilled = pruned  # events up to here are not in memory (with `older`: kept there)
        self._events: list[_Kept] = []
        self._indexes: list[int] = []
        self._raws: list[msgspec.Raw] = []  # beside _events: every topic is a slice
        self._topics: set[str] = set()  # every topic ever kept (a superset of them: a slice)
        self._start = 0
        self.last = last
        self.pruned = pruned

    def __len__(self) -> int:
        return len(self._events) - self._start

    def kept_json(self) -> list[msgspec.Raw]:
        """Every kept event's JSON in memory, oldest first."""
        return [kept.json for kept in self._events[self._start :]]

    def kept(self) -> list[Event]:
        """Every kept event in memory, oldest first."""
        return _events.decode(_encoder.encode(self.kept_json()))

    def extend(self, events: Iterable[Event]) -> None:
        """Append numbered events (each above every index before: ValueError else), then
        drop what the retention lets go."""
        for event in events:
            raw = msgspec.Raw(_encoder.encode(event))
            self._append(_Kept(event.index, event.ts, event.topic, raw))
        self._prune()

    def extend_json(self, raws: Iterable[bytes | msgspec.Raw], *, compact: bool = False) -> None:
        """`extend` with events as JSON (a snapshot's, a store's).  Each is kept compact,
        whatever its layout in the file (a pretty-printed snapshot's are indented): kept
        JSON goes verbatim into one-line answers and into the next snapshot's checksum.
        `compact`: the JSON is known compact already (a store's own encoding)."""
        for raw in raws:
            compact_raw = bytes(raw) if compact else msgspec.json.format(bytes(raw), indent=-1)
            head = _head.decode(compact_raw)
            self._append(_Kept(head.index, head.ts, head.topic, msgspec.Raw(compact_raw)))
        self._prune()

    def _append(self, kept: _Kept) -> None:
        if kept.number <= self.last:
            raise ValueError(f"event index {kept.number} is not above {self.last}")
        self._events.append(kept)
        self._indexes.append(kept.number)
        self._raws.append(kept.json)
        self._topics.add(kept.topic)
        self.last = kept.number

    def set_last(self, index: int) -> None:
        """The newest index moved without an event kept here (a number spent on nothing:
        a store whose indexes may skip)."""
        if index > self.last:
            self.last = index

    def _prune(self) -> None:
        events, retention = self._events, self.retention
        if not events:
            return
        newest_ts = events[-1].ts
        start = self._start
        kept = len(events) - start
        while kept and retention.drops_at(events[start].ts, newest_ts, kept):
            self.pruned = self.spilled = events[start].number
            start += 1
            kept -= 1
        if self._older is not None:  # the age floor's extra stays in the store only
            while kept > retention.keep:
                self.spilled = events[start].number
                start += 1
                kept -= 1
        self._start = start
        if start >= _COMPACT_AT and start * 2 >= len(events):
            del events[:start]
            del self._indexes[:start]
            del self._raws[:start]
            self._start = 0

    def read(
        self, after: int, topics: Collection[str], limit: int, upto: int | None = None
    ) -> RawBatch:
        """watch_events' answer now: up to `limit` kept events above `after` of `topics`,
        none above `upto` (default: the newest; `last` is never above it either).

        InvalidParams when `after` is above the newest index (a cursor of another daemon
        or store, or made up)."""
        horizon = self.last if upto is None else min(upto, self.last)
        if after > self.last:
            raise InvalidParams(
                f"param `after` ({after}) is above the newest event index "
                f"({self.last}); start from 0 or from a `last` this daemon answered",
                {"param": "after"},
            )
        if self._older is not None and after < self.spilled:
            return self._read_older(after, topics, limit, horizon)
        gap = after < self.pruned
        last = max(after, horizon)
        if not topics:  # asks only for `last`: the newest index
            return RawBatch(events=[], last=last, gap=gap)
        at = max(self._start, bisect_right(self._indexes, after, lo=self._start))
        if self._topics.issubset(topics):  # a follower of every topic there is: one slice
            end = min(bisect_right(self._indexes, horizon, lo=at), at + limit)
            if end > at:
                last = self._indexes[end - 1]
            return RawBatch(events=self._raws[at:end], last=last, gap=gap)
        out: list[msgspec.Raw] = []
        events = self._events
        for i in range(at, len(events)):
            kept = events[i]
            if kept.number > horizon:
                break
            if kept.topic in topics:
                out.append(kept.json)
                last = kept.number
                if len(out) >= limit:
                    break
        return RawBatch(events=out, last=last, gap=gap)

    def _read_older(
        self, after: int, topics: Collection[str], limit: int, horizon: int
    ) -> RawBatch:
        """`read` below `spilled`: from the store, then on in memory if the limit allows.
        At most _OLDER_SCAN rows are read per call (a follower of a rare topic far behind
        must not hold the event loop for a million rows): an answer without events may
        then stop short of the newest, its `last` saying how far it read, and the caller
        reads on from there (client._server.event_log does, before answering)."""
        assert self._older is not None
        upto = min(self.spilled, horizon)
        scan = min(_OLDER_SCAN, max(limit * 4, 1000)) if topics else 0
        floor, rows = self._older(after, upto, scan)
        gap = after < floor
        if not topics:  # asks only for `last`
            return RawBatch(events=[], last=max(after, horizon), gap=gap)
        out: list[msgspec.Raw] = []
        last = after  # how far the rows were read
        returned = after  # the last event in `out`: `last` when there is one
        for row in rows:
            head = _head.decode(row)
            last = head.index
            if head.topic in topics:
                out.append(msgspec.Raw(row))
                returned = head.index
                if len(out) >= limit:
                    return RawBatch(events=out, last=returned, gap=gap)
        if len(rows) < scan or last >= upto:  # the store's part is read: on in memory
            last = max(last, upto)
            if last < horizon:
                rest = self.read(last, topics, limit - len(out), horizon)
                if rest.events or not out:
                    return RawBatch(events=out + rest.events, last=rest.last, gap=gap)
        return RawBatch(events=out, last=returned if out else last, gap=gap)
        if len(rows) < scan or last >= upto:  # the store's part is read: on in memory
            last = max(last, upto)
            if last < horizon:
                rest = self.read(last, topics, limit - len(out), horizon)
                if rest.events or not out:
                    last = rest.last
                return RawBatch(events=out + rest.events, last=last, gap=gap)
        return RawBatch(events=out, last=last, gap=gap)
