"""Strict JSON for everything a client sends (docs/contracts.md#framing): no duplicate
object keys, at most MAX_DEPTH levels of nesting.

A proxy and the daemon must never read different values from one document, so
`{"priority": 0, "priority": -5}` is refused, not read as its last key.  msgspec keeps
the last key silently, so the check is ours, made cheap for the common case:

- Every key is followed by a colon, so a document's key count is at most its colon count.
  If the colons are as many as the keys of the top object and of the objects directly in
  it (a request's envelope and its params), no key can be missing: nothing more to do.
- Otherwise the decoded value is walked once, counting its keys and the colons inside its
  strings; the colons outside strings are exactly the keys the text had, so fewer decoded
  keys means a duplicate.  (A colon written as `\\u003a` would make the count unsure; such
  a document is checked by the standard library's decoder, key by key.)

Depth: msgspec refuses what would exhaust the stack (RecursionError); a document with
more opening brackets than MAX_DEPTH is walked to measure its depth.

`loads_big` decodes a large document in pieces of at most PIECE_BYTES, each a short call
into msgspec, so a thread decoding it lets the event loop run between pieces (the GIL is
released only between Python steps; one call decoding 16 MiB holds it for 100+ ms).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

import msgspec

MAX_DEPTH: Final = 512
"""The deepest nesting accepted (arrays and objects); deeper is refused."""
PIECE_BYTES: Final = 64 * 1024
"""`loads_big` decodes pieces of at most this size with one call each."""

# A float literal beyond a double (1e400) becomes an infinity, so that the param check
# (client.api.numbers) answers it as InvalidParams naming the param, not as bad JSON.
_decoder = msgspec.json.Decoder(float_hook=float)
_list_of_raw = msgspec.json.Decoder(list[msgspec.Raw])
_object_of_raw = msgspec.json.Decoder(dict[str, msgspec.Raw])
_ESCAPED_COLON: Final = (b"\\u003a", b"\\u003A")
_KEY = re.compile(rb'\s*("[^"\\]*(?:\\.[^"\\]*)*")\s*:\s*', re.DOTALL)
_AFTER_VALUE = re.compile(rb"\s*([,}])")
_WHITESPACE = b" \t\r\n"


class JsonRefused(ValueError):
    """Valid JSON that strict JSON refuses: a duplicate key or too deep a nesting."""


def duplicate_key() -> JsonRefused:
    return JsonRefused("an object has the same key twice; send each key once")


def too_deep() -> JsonRefused:
    return JsonRefused(f"nested deeper than {MAX_DEPTH} levels; flatten the value")


def loads(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """Decode `data` strictly.  Raises msgspec.DecodeError for what is not JSON (or not
    UTF-8) and JsonRefused for a duplicate key or nesting deeper than `max_depth` levels
    (MAX_DEPTH; less where the caller is itself inside a document)."""
    try:
        value = _decoder.decode(data)
    except RecursionError:
        raise too_deep() from None
    check(value, data, max_depth)
    return value


def check(value: Any, data: bytes, max_depth: int = MAX_DEPTH) -> None:
    """JsonRefused if `value`, decoded from `data`, lost a duplicate key or nests deeper
    than `max_depth` (see the module docstring for how it stays cheap)."""
    colons = data.count(b":")
    counted = colons != 0 and colons != _shallow_keys(value)
    if not counted and data.count(b"[") + data.count(b"{") <= max_depth:
        return
    keys, colons_in_strings = _walk(value, max_depth)
    if not counted:
        return
    if any(escaped in data for escaped in _ESCAPED_COLON):
        _check_pairs(data)
    elif keys != colons - colons_in_strings:
        raise duplicate_key()


def _shallow_keys(value: Any) -> int:
    """The keys of the top object and of the objects directly in it (-1: not an object)."""
    if type(value) is not dict:
        return -1
    return len(value) + sum(len(v) for v in value.values() if type(v) is dict)


def _walk(value: Any, max_depth: int) -> tuple[int, int]:
    """(keys, colons inside strings) of a decoded value; JsonRefused past `max_depth`."""
    keys = colons = 0
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise too_deep()
        if type(item) is dict:
            keys += len(item)
            for key, child in item.items():
                colons += key.count(":")
                if type(child) is str:
                    colons += child.count(":")
                elif type(child) is dict or type(child) is list:
                    stack.append((child, depth + 1))
        elif type(item) is list:
            for child in item:
                if type(child) is str:
                    colons += child.count(":")
                elif type(child) is dict or type(child) is list:
                    stack.append((child, depth + 1))
    if type(value) is str:
        colons += value.count(":")
    return keys, colons


def _no_duplicates(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result = dict(pairs)
    if len(result) != len(pairs):
        raise duplicate_key()
    return result


def _check_pairs(data: bytes) -> None:
    """The exact, slower check: the standard library's decoder sees every key."""
    try:
        json.loads(data, object_pairs_hook=_no_duplicates)
    except json.JSONDecodeError as exc:  # what msgspec read, it cannot: refuse, not guess
        raise JsonRefused(f"not strict JSON: {exc}") from None


def loads_big(data: bytes, max_depth: int = MAX_DEPTH) -> Any:
    """`loads` in pieces of at most PIECE_BYTES (for a thread; see the module docstring).
    The same value and the same refusals as `loads`."""
    try:
        return _piece(data, max_depth)
    except RecursionError:
        raise too_deep() from None


def _piece(buf: bytes, budget: int) -> Any:
    """Decode one value of `buf` whose nesting may use `budget` more levels."""
    if len(buf) <= PIECE_BYTES:
        return loads(buf, budget)
    head = buf.lstrip(_WHITESPACE)[:1]
    if head not in (b"[", b"{"):
        return loads(buf, budget)  # one big string or number: nothing to split
    if budget < 1:
        raise too_deep()
    if head == b"[":
        return _array(_list_of_raw.decode(buf), budget)
    members = _object_of_raw.decode(buf)
    _same_keys(buf, members)
    return {key: _piece(bytes(raw), budget - 1) for key, raw in members.items()}


def _array(items: list[msgspec.Raw], budget: int) -> list[Any]:
    """An array's items, small ones decoded together as arrays of about PIECE_BYTES."""
    out: list[Any] = []
    batch: list[msgspec.Raw] = []
    size = 0
    for raw in items:
        if len(raw) > PIECE_BYTES:
            if batch:
                out += loads(b"[" + b",".join(batch) + b"]", budget)
                batch, size = [], 0
            out.append(_piece(bytes(raw), budget - 1))
            continue
        batch.append(raw)
        size += len(raw) + 1
        if size >= PIECE_BYTES:
            out += loads(b"[" + b",".join(batch) + b"]", budget)
            batch, size = [], 0
    if batch:
        out += loads(b"[" + b",".join(batch) + b"]", budget)
    return out


def _same_keys(buf: bytes, members: dict[str, msgspec.Raw]) -> None:
    """JsonRefused if the object in `buf` has a key twice.  Its decoded members, in order,
    must be its text's members: each key where the text has it and each value exactly the
    text's bytes; a duplicate shifts a value or leaves a member over."""
    pos = buf.index(b"{") + 1
    last = b"}"
    for key, raw in members.items():
        found = _KEY.match(buf, pos)
        if found is None or _decoder.decode(found.group(1)) != key:
            raise duplicate_key()
        value = bytes(raw)
        if not buf.startswith(value, found.end()):
            raise duplicate_key()
        after = _AFTER_VALUE.match(buf, found.end() + len(value))
        if after is None:
            raise duplicate_key()
        pos, last = after.end(), after.group(1)
    if last != b"}":
        raise duplicate_key()
