"""Journal framing and the recovery scan: torn tails ignored, real damage refused."""

from __future__ import annotations

import pytest

from wconfd.storage import JournalCorruptError
from wconfd.storage.journal_format import HEADER, encode_frame, payload_of, scan


def journal(n: int, batches: list[int] | None = None) -> tuple[bytes, list[int]]:
    """n frames; `batches` gives each frame's batch seq (default: all in their own)."""
    data = b""
    starts = []
    for seq in range(1, n + 1):
        starts.append(len(data))
        batch = batches[seq - 1] if batches else seq
        data += encode_frame(f"payload-{seq}".encode() * seq, seq, batch)
    return data, starts


def test_scan_round_trip_and_zero_padding() -> None:
    data, _ = journal(5)
    for tail in (b"", bytes(4096)):
        result = scan(data + tail, "j")
        assert [f.seq for f in result.frames] == [1, 2, 3, 4, 5]
        assert result.end == len(data) and result.torn_bytes == 0 and result.reason == ""
        assert bytes(payload_of(data, result.frames[2])) == b"payload-3" * 3
    assert scan(b"", "j").frames == []
    assert scan(bytes(100), "j").end == 0


@pytest.mark.parametrize("padding", [0, 512])
def test_torn_tail_at_every_offset_of_last_record(padding: int) -> None:
    data, starts = journal(4)
    last = starts[-1]
    for cut in range(last + 1, len(data)):
        torn = data[:cut] + bytes(padding)
        result = scan(torn, "j")
        assert [f.seq for f in result.frames] == [1, 2, 3], cut
        assert result.end == last
        assert result.torn_bytes > 0


def test_garbage_tail_ignored() -> None:
    data, starts = journal(3)
    damaged = bytearray(data)
    damaged[starts[-1] + HEADER.size + 2] ^= 0xFF  # payload bit flip in the last record
    result = scan(bytes(damaged), "j")
    assert [f.seq for f in result.frames] == [1, 2]
    assert result.reason == "checksum mismatch"
    assert [f.seq for f in scan(data + b"\x01garbage", "j").frames] == [1, 2, 3]


def test_damage_before_a_later_batch_is_refused() -> None:
    data, starts = journal(5)
    damaged = bytearray(data)
    damaged[starts[2] + HEADER.size] ^= 0x01  # record 3; records 4, 5 were later writes
    with pytest.raises(JournalCorruptError) as err:
        scan(bytes(damaged), "path/j")
    assert err.value.path == "path/j"
    assert "acknowledged" in err.value.reason


def test_damage_inside_the_last_batch_is_a_torn_tail() -> None:
    # Records 3, 4, 5 were one write (batch 3): pages may land out of order, none was
    # acknowledged, so a bad record 3 followed by a good record 5 is still a torn tail.
    data, starts = journal(5, batches=[1, 2, 3, 3, 3])
    damaged = bytearray(data)
    damaged[starts[2] + HEADER.size] ^= 0x01
    result = scan(bytes(damaged), "j")
    assert [f.seq for f in result.frames] == [1, 2]


def test_seq_gap_is_refused() -> None:
    data = encode_frame(b"a", 1, 1) + encode_frame(b"b", 3, 3)
    with pytest.raises(JournalCorruptError, match="expected 2"):
        scan(data, "j")
