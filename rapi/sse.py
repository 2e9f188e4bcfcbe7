"""The event stream's wire format (docs/contracts.md#events): pure, no I/O.

`GET /2/events` merges both daemons' events.  Its `id:` is a cursor naming, for each daemon,
the last index the client has been given (`<luxid>-<wconfd>`, opaque to clients): sent back
as `Last-Event-ID`, it says exactly where to go on from, so nothing is lost or repeated.
Each event is `id:`, `event:` (the topic, or `gap`), `data:` (one line of JSON) and a blank
line; a comment line keeps an idle connection alive.
"""

from __future__ import annotations

from typing import Final, NamedTuple

import msgspec

from client.api.common import TOPICS, Event

DAEMONS: Final = ("luxid", "wconfd")
STREAM_HEADERS: Final = {
    "Content-Type": "text/event-stream",
    "Cache-Control": "no-cache",
    "X-Accel-Buffering": "no",  # a proxy in front must pass each event on at once
}
"""The headers of an event stream's response (`GET /2/events`, the dashboard's `/ui/events`)."""
_encoder = msgspec.json.Encoder()


class Cursor(NamedTuple):
    """The last index given, per daemon."""

    luxid: int
    wconfd: int

    def encode(self) -> str:
        return f"{self.luxid}-{self.wconfd}"

    def moved(self, daemon: str, index: int) -> Cursor:
        """The cursor after one more event (or `last`) of `daemon`."""
        return self._replace(**{daemon: index})


def decode_cursor(text: str) -> Cursor:
    """A cursor from `Last-Event-ID`; ValueError if it is not one this API gave out."""
    first, sep, second = text.strip().partition("-")
    if not sep or not first.isdigit() or not second.isdigit():
        raise ValueError(f"Last-Event-ID {text!r} is not a cursor of this stream")
    return Cursor(int(first), int(second))


def parse_topics(text: str | None) -> list[str] | None:
    """`?topics=job,drain` (None: the default topics); ValueError naming an unknown one."""
    if text is None or not text.strip():
        return None
    topics = [t.strip() for t in text.split(",") if t.strip()]
    unknown = [t for t in topics if t not in TOPICS]
    if unknown:
        raise ValueError(f"unknown topic(s) {', '.join(unknown)}; known: {', '.join(TOPICS)}")
    return topics


def frame(cursor: Cursor, name: str, data: object) -> bytes:
    """One event of the stream: `id`, `event`, `data` as one JSON line, blank line."""
    return (
        b"id: "
        + cursor.encode().encode()
        + b"\nevent: "
        + name.encode()
        + b"\ndata: "
        + _encoder.encode(data)
        + b"\n\n"
    )


def event_frame(cursor: Cursor, event: Event) -> bytes:
    """An event under its topic."""
    return frame(cursor, event.topic, event)


def gap_frame(cursor: Cursor, daemon: str, after: int) -> bytes:
    """Events of `daemon` after `after` are no longer kept (some were lost to the client)."""
    message = f"{daemon}'s events after index {after} are no longer kept; some are missing"
    return frame(cursor, "gap", {"daemon": daemon, "after": after, "message": message})


KEEPALIVE: Final = b": keepalive\n\n"
