"""Strict JSON for everything a client sends (docs/contracts.md#framing): no duplicate
object keys, at most MAX_DEPTH levels of nesting.

A proxy and the daemon must never read different values from one document, so
`{"priority": 0, "priority": -5}` is refused, not read as its last key.  msgspec keeps
the last key silently, so the check is ours, made cheap for the common case:

- Every key is followed by a colon, so a document's key count is at most its colon count.
  If the colons are as many as the keys of a request's envelope and of its params
  object, no key can be missing: nothing more to do (ping, most lock calls).
- Otherwise the decoded value is encoded again (msgspec, in C): its colons are its keys
  plus the colons inside its strings, which are the text's own string colons.  So the
  text has a duplicate exactly when it has more colons than the encoding: the dropped
  key's colon (and any in its value) is missing.  A colon written as `\\u003a` would
  make the count unsure; such a document is checked by the standard library's decoder,
  key by key.

Depth: msgspec refuses what would exhaust the stack (RecursionError); a document long
enough and with more opening brackets than MAX_DEPTH is walked to measure its depth.

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
_encoder = msgspec.json.Encoder()
_ESCAPED_COLON: Final = b"\\u003"  # \u003a or \u003A is a colon
_STRING_PATTERN = rb'"[^"\\]*(?:\\.[^"\\]*)*"'
_STRING = re.compile(_STRING_PATTERN, re.DOTALL)
_KEY = re.compile(rb"[ \t\r\n]*(" + _STRING_PATTERN + rb")[ \t\r\n]*:", re.DOTALL)
_SCALAR = re.compile(rb"-?[0-9][0-9.eE+-]*|true|false|null")
_AFTER_VALUE = re.compile(rb"[ \t\r\n]*([,}])")
_SPACE = re.compile(rb"[ \t\r\n]*")
_TRAILING = re.compile(r"trailing characters \(byte (\d+)\)")
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
    (MAX_DEPTH; less where the caller is itself inside a document).  Every request frame
    comes through here, so the common case is written out, without further calls."""
    try:
        value = _decoder.decode(data)
    except RecursionError:
        raise too_deep() from None
    colons = data.count(b":")
    if colons:
        if type(value) is dict:
            params = value.get("params")
            envelope = len(value) + len(params) if type(params) is dict else len(value)
        else:
            envelope = -1
        if colons != envelope:
            _count_keys(value, data, colons)
    # A document nests at most half its length deep, and at most as deep as its brackets.
    if len(data) > 2 * max_depth and data.count(b"[") + data.count(b"{") > max_depth:
        _check_depth(value, max_depth)
    return value


def _count_keys(value: Any, data: bytes, colons: int) -> None:
    """JsonRefused if `data`, with `colons` colons, has more keys than `value` (decoded)."""
    if _ESCAPED_COLON in data:  # \u003a might be a colon: let every key be seen
        _check_pairs(data)
    elif _encoder.encode(value).count(b":") != colons:
        raise duplicate_key()


def _check_depth(value: Any, max_depth: int) -> None:
    """JsonRefused if `value` nests deeper than `max_depth` (walked without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > max_depth:
            raise too_deep()
        children = item.values() if type(item) is dict else item
        stack += [(c, depth + 1) for c in children if type(c) is dict or type(c) is list]


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
    """`loads` in pieces (for a thread; see the module docstring): the same value and the
    same refusals as `loads`, but no single call into msgspec reads much more than
    PIECE_BYTES, except to decode one string or number longer than that."""
    try:
        value, end = _value_at(data, 0, max_depth)
    except RecursionError:
        raise too_deep() from None
    if data[end:].strip(_WHITESPACE):
        raise msgspec.DecodeError("JSON is malformed: trailing characters after the value")
    return value


def _value_at(text: bytes, pos: int, budget: int) -> tuple[Any, int]:
    """The value starting at `pos` (after whitespace), nesting at most `budget` levels, and
    where it ends."""
    pos += len(_SPACE.match(text, pos).group())  # type: ignore[union-attr]  # matches ""
    head = text[pos : pos + 1]
    if head == b"[" or head == b"{":
        if budget < 1:
            raise too_deep()
        return _container_at(text, pos, budget)
    found = (_STRING if head == b'"' else _SCALAR).match(text, pos)
    if found is None:
        raise msgspec.DecodeError(f"JSON is malformed: no value at byte {pos}")
    return loads(found.group(), budget), found.end()


def _container_at(text: bytes, start: int, budget: int) -> tuple[Any, int]:
    """The array or object at `start` and where it ends, decoded a run of members at a time.

    A run is cut at a comma about PIECE_BYTES on and decoded inside the container's own
    bracket: a parser reading the same bytes from the same state is in the same state, so
    the run decodes only if the comma is one between the container's own members (a comma
    inside a string or a nested value leaves something open).  msgspec then says
    "trailing characters (byte N)" when the container closed inside the run: that is where
    it ends.  A cut that does not decode is tried again twice as far on; after two misses
    one member of an object is read on its own (its value may be the big one), so no run
    grows much past a piece unless one array item is that big itself.
    """
    is_array = text[start : start + 1] == b"["
    opening, closing = (b"[", b"]") if is_array else (b"{", b"}")
    items: list[Any] = []
    members: dict[str, Any] = {}
    pos, size, misses = start + 1, PIECE_BYTES, 0
    while True:
        if misses >= 2 and not is_array:
            pos, done = _member_at(text, pos, budget, members)
            if done:
                return members, pos
            size, misses = PIECE_BYTES, 0
            continue
        cut = text.find(b",", pos + size)
        run = text[pos:] if cut < 0 else text[pos:cut]
        try:
            value = loads(opening + run + (b"" if cut < 0 else closing), budget)
        except msgspec.DecodeError as exc:
            trailing = _TRAILING.search(str(exc))
            if trailing is None:
                if cut < 0 and is_array:
                    raise
                size, misses = size * 2, misses + 1
                continue
            # msgspec's byte N is one past the first trailing byte; the container's own
            # closing bracket is the last one before it.
            first_trailing = pos + int(trailing.group(1)) - 2
            end = text.rindex(closing, pos, first_trailing) + 1
            value = loads(opening + text[pos:end], budget)
            _gather(value, items, members, pos > start + 1)
            return (items if is_array else members), end
        _gather(value, items, members, pos > start + 1)
        if cut < 0:
            return (items if is_array else members), len(text)
        pos, size, misses = cut + 1, PIECE_BYTES, 0


def _gather(value: Any, items: list[Any], members: dict[str, Any], after_comma: bool) -> None:
    """Add a run's decoded members: an array's items, or an object's members (JsonRefused
    if a key was in an earlier run too).  A run after a comma has at least one."""
    if after_comma and not value:
        raise msgspec.DecodeError("JSON is malformed: a comma before ']' or '}'")
    if type(value) is list:
        items += value
        return
    if not members.keys().isdisjoint(value):
        raise duplicate_key()
    members.update(value)


def _member_at(text: bytes, pos: int, budget: int, members: dict[str, Any]) -> tuple[int, bool]:
    """Read one object member at `pos` into `members`; where the next starts, and whether
    the object ended."""
    found = _KEY.match(text, pos)
    if found is None:
        raise msgspec.DecodeError(f"JSON is malformed: no object key at byte {pos}")
    key = _decoder.decode(found.group(1))
    if key in members:
        raise duplicate_key()
    members[key], pos = _value_at(text, found.end(), budget - 1)
    after = _AFTER_VALUE.match(text, pos)
    if after is None:
        raise msgspec.DecodeError(f"JSON is malformed: expected ',' or '}}' at byte {pos}")
    return after.end(), after.group(1) == b"}"
