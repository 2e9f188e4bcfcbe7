"""The event stream's wire format (rapi.sse, docs/contracts.md#events): a cursor survives
encoding, junk is refused, each frame is `id:`, `event:`, one line of JSON `data:` and a
blank line, and a client that resumes from any frame's id with the events after it sees
the rest exactly once.
"""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.api.common import TOPICS, Event
from rapi.sse import Cursor, decode_cursor, event_frame, gap_frame, parse_topics

index = st.integers(0, 2**62)


@settings(max_examples=300)
@given(index, index)
def test_a_cursor_decodes_to_itself(luxid, wconfd):
    cursor = Cursor(luxid, wconfd)
    assert decode_cursor(cursor.encode()) == cursor


@pytest.mark.parametrize("junk", ["", "12", "a-b", "1-2-3", "-1-2", "1.5-2", "1_000-2"])
def test_junk_is_no_cursor(junk):
    with pytest.raises(ValueError):
        decode_cursor(junk)


def parse(stream: bytes) -> list[dict[str, str]]:
    """Frames of an SSE stream as {field: value} (comments skipped)."""
    frames = []
    for block in stream.decode().split("\n\n"):
        fields = dict(
            line.split(": ", 1) for line in block.split("\n") if line and not line.startswith(":")
        )
        if fields:
            frames.append(fields)
    return frames


text = st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=30)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.sampled_from(["luxid", "wconfd"]), st.sampled_from(TOPICS), text),
                max_size=30))  # fmt: skip
def test_frames_carry_one_json_line_and_resume_exactly_once(items):
    cursor = Cursor(0, 0)
    counters = {"luxid": 0, "wconfd": 0}
    stream = b""
    sent = []
    for daemon, topic, message in items:
        counters[daemon] += 1
        event = Event(counters[daemon], 1.0, daemon, topic, "x", message, {"m": message})
        cursor = cursor.moved(daemon, event.index)
        stream += event_frame(cursor, event)
        sent.append(event)
    frames = parse(stream)
    assert [f["event"] for f in frames] == [e.topic for e in sent]
    assert [json.loads(f["data"])["key"] for f in frames] == [e.key for e in sent]
    for cut, frame in enumerate(frames):  # resume after frame `cut`
        resumed = decode_cursor(frame["id"])
        rest = [e for e in sent if e.index > getattr(resumed, e.daemon)]
        assert rest == sent[cut + 1 :]


def test_a_gap_frame_and_topics():
    frame = parse(gap_frame(Cursor(3, 4), "wconfd", 2))[0]
    assert frame["event"] == "gap" and frame["id"] == "3-4"
    assert json.loads(frame["data"])["daemon"] == "wconfd"
    assert parse_topics(None) is None and parse_topics("job, drain") == ["job", "drain"]
    with pytest.raises(ValueError, match="unknown topic"):
        parse_topics("job,nope")
