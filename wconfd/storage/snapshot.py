"""Snapshot files: JSON, written atomically, checked on load.

Layout (field order fixed so a reader sees the header first):

    {"format": "lockwarden-snapshot", "name": NAME, "seq": N, "crc32": C, "state": {...}}

`seq` is the last journal record the state includes; `crc32` is the CRC of the state's
compact JSON, so a damaged file is refused.  An operator who edits the state by hand
removes the `crc32` field (then it is not checked).

The file is written compact, on one line (`jq .` shows it indented): then the state's
bytes in the file are the ones the checksum covers, and loading checks them as they are,
without first reformatting 70 MB (at 100,000 instances; docs/contracts.md#performance-targets).
An indented file (`indent` >= 0, or older files) loads too: its state is compacted first.
"""

from __future__ import annotations

import os
import zlib
from typing import Final, Generic, NamedTuple, TypeVar

import msgspec

from .errors import SnapshotCorruptError
from .fileops import FileOps

FORMAT: Final = "lockwarden-snapshot"
T = TypeVar("T")


class Envelope(msgspec.Struct, forbid_unknown_fields=True):
    """The snapshot file's top level; `state` is decoded separately with its own type."""

    format: str
    name: str
    seq: int
    state: msgspec.Raw
    crc32: int | None = None


class _Header(msgspec.Struct, forbid_unknown_fields=True):
    """The header fields in file order (the state is appended as raw JSON)."""

    format: str
    name: str
    seq: int
    crc32: int


def encode_snapshot(name: str, seq: int, state_json: bytes, indent: int = -1) -> list[bytes]:
    """The file contents for `state_json` (compact JSON of the state) at `seq`, as chunks
    to write in order: compact (`indent` < 0), or indented by `indent`.

    The state is never concatenated with the header; indented, it is formatted on its own
    at column 0, so the only long GIL-holding step is one `msgspec.json.format` (~6 ms for
    4.5 MB).
    """
    header = msgspec.json.encode(
        _Header(format=FORMAT, name=name, seq=seq, crc32=zlib.crc32(state_json))
    )
    if indent < 0:
        return [header[:-1] + b',"state":', state_json, b"}\n"]
    head = msgspec.json.format(header, indent=indent)
    head = head[: head.rindex(b"}")].rstrip() + b",\n" + b" " * indent + b'"state": '
    return [head, msgspec.json.format(state_json, indent=indent), b"\n}\n"]


class Decoded(NamedTuple, Generic[T]):
    """A snapshot file's contents: the seq its state includes, the state, and whether its
    checksum matched (`checked`: the state is byte for byte as it was written, and was
    decoded from its compact JSON, so any msgspec.Raw in it is compact JSON too; False
    when the file has no crc32, as after an edit by hand)."""

    seq: int
    state: T
    checked: bool


def decode_snapshot(path: str, name: str, data: bytes, state_type: type[T]) -> Decoded[T]:
    """Decode a snapshot file's contents; SnapshotCorruptError saying what is wrong
    otherwise."""
    head: _Header | Envelope
    state_json: bytes | memoryview | msgspec.Raw
    compact = _compact_parts(data)
    if compact is not None:  # as written: the state's bytes are the checksummed ones
        head, state_json = compact
    else:
        try:
            head = msgspec.json.decode(data, type=Envelope)
        except msgspec.DecodeError as exc:
            raise SnapshotCorruptError(path, f"not a valid snapshot file: {exc}") from None
        state_json = _checked_state(path, head)
    if head.format != FORMAT:
        raise SnapshotCorruptError(path, f"format is {head.format!r}, not {FORMAT!r}")
    if head.name != name:
        raise SnapshotCorruptError(path, f"snapshot of {head.name!r}, expected {name!r}")
    if head.seq < 0:
        raise SnapshotCorruptError(path, f"negative seq {head.seq}")
    try:
        state = msgspec.json.decode(state_json, type=state_type)
    except msgspec.DecodeError as exc:
        raise SnapshotCorruptError(path, f"invalid state: {exc}") from None
    return Decoded(head.seq, state, head.crc32 is not None)


def _checked_state(path: str, env: Envelope) -> bytes | msgspec.Raw:
    """The state of a file parsed whole: compacted and checked against its crc32 (an
    indented file, or a damaged one), or as it is when it has none (edited by hand)."""
    if env.crc32 is None or zlib.crc32(env.state) == env.crc32:
        return env.state
    compact = msgspec.json.format(env.state, indent=-1)
    if zlib.crc32(compact) != env.crc32:
        raise SnapshotCorruptError(
            path,
            "state checksum mismatch (damaged file; if it was edited by hand on purpose, "
            "delete the crc32 field)",
        )
    return compact


_STATE_KEY: Final = b',"state":'


def _compact_parts(data: bytes) -> tuple[_Header, memoryview] | None:
    """The header and the state of a file laid out as `encode_snapshot` writes it compact,
    found without parsing the state, if the state's CRC matches the header's (so the
    state is exactly what was checksummed, and the whole file valid JSON); else None, and
    the file is parsed whole (indented, edited by hand, or damaged)."""
    cut = data.find(_STATE_KEY, 0, 1024)
    end = len(data)
    while end and data[end - 1] in b" \t\r\n":
        end -= 1
    if cut < 0 or not end or data[end - 1] != ord("}"):
        return None
    try:
        header = msgspec.json.decode(data[:cut] + b"}", type=_Header)
    except msgspec.DecodeError:
        return None
    state = memoryview(data)[cut + len(_STATE_KEY) : end - 1]
    return (header, state) if zlib.crc32(state) == header.crc32 else None


def write_atomic(path: str, chunks: list[bytes], ops: FileOps) -> None:
    """Replace `path` with the concatenated `chunks` atomically and durably: temp file in
    the same directory, fsync, rename, fsync of the directory.  OSError on failure (the
    old file stays; the temp file is removed)."""
    tmp = path + ".tmp"
    fd = ops.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    try:
        try:
            offset = 0
            for chunk in chunks:
                ops.pwrite(fd, chunk, offset)
                offset += len(chunk)
            ops.fsync(fd)
        finally:
            ops.close(fd)
        ops.replace(tmp, path)
    except BaseException:
        ops.unlink(tmp)
        raise
    ops.fsync_dir(os.path.dirname(path) or ".")
