"""Journal framing and recovery scan (pure functions over bytes).

A frame is a 28-byte header then the payload (a msgpack-encoded record):

    magic "LWJ1" | length u32 | crc32 u32 | seq u64 | batch u64      (little endian)

`seq` numbers records 1, 2, 3, ... across the store's life; `batch` is the seq of the first
record of the write (group commit) the frame was part of; the CRC covers length, seq, batch
and payload.  The file may end in zeros (preallocated space).

Recovery: frames are read until the first one that is incomplete, fails its CRC, or is
garbage.  That is a torn tail (ignored, and truncated by the store) *unless* a valid frame
of a later batch follows it: a later batch is only written after the earlier one was
synced and acknowledged, so damage before it means acknowledged records are gone, and the
scan raises JournalCorruptError instead of silently dropping them.
"""

from __future__ import annotations

import struct
import zlib
from typing import Final, NamedTuple

from .errors import JournalCorruptError

MAGIC: Final = b"LWJ1"
HEADER: Final = struct.Struct("<4sIIQQ")
_CRC_FIELDS: Final = struct.Struct("<IQQ")
MAX_PAYLOAD: Final = 1 << 30


def _crc(length: int, seq: int, batch: int, payload: bytes | memoryview) -> int:
    """CRC32 of the header fields after the CRC, then the payload."""
    return zlib.crc32(payload, zlib.crc32(_CRC_FIELDS.pack(length, seq, batch)))


def encode_frame(payload: bytes, seq: int, batch: int) -> bytes:
    """One framed record."""
    length = len(payload)
    if length > MAX_PAYLOAD:
        raise ValueError(f"record of {length} bytes is larger than {MAX_PAYLOAD}")
    return HEADER.pack(MAGIC, length, _crc(length, seq, batch, payload), seq, batch) + payload


class Frame(NamedTuple):
    """A valid frame found by the scan: its seq, batch, and where it lies in the file."""

    seq: int
    batch: int
    start: int
    end: int


class ScanResult(NamedTuple):
    """Valid frames in order, where the valid data ends, and what followed it."""

    frames: list[Frame]
    end: int
    torn_bytes: int  # non-zero bytes after `end` that were ignored (a torn tail)
    reason: str  # why the scan stopped ("" at a clean end)


def _frame_at(data: bytes, pos: int) -> tuple[Frame | None, str]:
    """The valid frame starting at `pos`, or None and why not."""
    if len(data) - pos < HEADER.size:
        return None, "incomplete header"
    magic, length, crc, seq, batch = HEADER.unpack_from(data, pos)
    if magic != MAGIC:
        return None, "bad magic"
    end = pos + HEADER.size + length
    if length > MAX_PAYLOAD or end > len(data):
        return None, "record runs past the end of the file"
    payload = memoryview(data)[pos + HEADER.size : end]
    if _crc(length, seq, batch, payload) != crc:
        return None, "checksum mismatch"
    if batch > seq:
        return None, "batch after seq"
    return Frame(seq, batch, pos, end), ""


def payload_of(data: bytes, frame: Frame) -> memoryview:
    """The payload bytes of a scanned frame."""
    return memoryview(data)[frame.start + HEADER.size : frame.end]


def scan(data: bytes, path: str) -> ScanResult:
    """All valid frames of a journal file's contents, torn tail detected (see module doc).

    Raises JournalCorruptError if acknowledged data is damaged or seqs are not consecutive.
    """
    frames: list[Frame] = []
    pos = 0
    size = len(data)
    reason = ""
    # The loop checks a frame as `_frame_at` does, inlined: a restart scans 100,000.  The
    # CRC runs over the length (bytes 4-8) and then seq, batch and payload (12-end).
    view = memoryview(data)
    unpack, crc32, head = HEADER.unpack_from, zlib.crc32, HEADER.size
    new = tuple.__new__  # a Frame without its Python-level __new__: half the cost
    append, next_seq = frames.append, 0
    while pos < size:
        if size - pos >= head:
            magic, length, crc, seq, batch = unpack(data, pos)
            end = pos + head + length
            if (
                magic == MAGIC
                and end <= size
                and length <= MAX_PAYLOAD
                and batch <= seq
                and crc32(view[pos + 12 : end], crc32(data[pos + 4 : pos + 8])) == crc
            ):
                if seq != next_seq and frames:
                    raise JournalCorruptError(
                        path, f"record at offset {pos} has seq {seq}, expected {next_seq}"
                    )
                next_seq = seq + 1
                append(new(Frame, (seq, batch, pos, end)))
                pos = end
                continue
        if data[pos : pos + 4] == b"\0\0\0\0" and not data[pos:].strip(b"\0"):
            return ScanResult(frames, pos, 0, "")
        _, reason = _frame_at(data, pos)  # not a valid frame: why not
        break
    else:
        return ScanResult(frames, pos, 0, "")
    # Damage at `pos`: a torn tail unless a later batch follows.
    expected = frames[-1].seq + 1 if frames else None
    probe = data.find(MAGIC, pos + 1)
    while probe != -1:
        later, _ = _frame_at(data, probe)
        if later is not None and (expected is None or later.batch > expected):
            raise JournalCorruptError(
                path,
                f"damaged record at offset {pos} ({reason}) is followed by record seq "
                f"{later.seq} of a later write at offset {probe}: acknowledged records lost",
            )
        probe = data.find(MAGIC, probe + 1)
    torn = len(data[pos:].rstrip(b"\0"))
    return ScanResult(frames, pos, torn, reason)
