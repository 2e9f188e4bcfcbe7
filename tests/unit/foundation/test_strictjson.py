"""Strict JSON (docs/contracts.md#framing) against a reference: the standard library's
decoder with a hook that sees every key.  Whatever the text (whitespace, escapes, colons
in strings, `\\u003a`), `loads` and `loads_big` answer what the reference answers, and
nesting is refused past MAX_DEPTH, never with a RecursionError."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client import strictjson
from client.strictjson import MAX_DEPTH, JsonRefused, loads, loads_big


class Pairs(list):  # type: ignore[type-arg]
    """An object written as its (key, value) pairs, duplicates and all."""


keys = st.sampled_from(["a", "b", "a:b", "priority", ":", "\u00e9", "k\n"])
scalars = st.one_of(
    st.integers(-10, 10), st.booleans(), st.none(), st.sampled_from(["x", "a:b", "::", '"q"'])
)
# Objects as pair lists, so the text may repeat a key.
values = st.recursive(
    scalars,
    lambda kids: st.one_of(
        st.lists(kids, max_size=4), st.lists(st.tuples(keys, kids), max_size=4).map(Pairs)
    ),
    max_leaves=12,
)


def render(value: Any, style: str) -> str:
    sep, colon = {"compact": (",", ":"), "spaced": (", ", " : "), "escaped": (",", ":")}[style]
    if isinstance(value, Pairs):
        parts = []
        for key, item in value:
            text = json.dumps(key)
            if style == "escaped":
                text = text.replace(":", "\\u003a")
            parts.append(f"{text}{colon}{render(item, style)}")
        return "{" + sep.join(parts) + "}"
    if isinstance(value, list):
        return "[" + sep.join(render(v, style) for v in value) + "]"
    return json.dumps(value)


def reference(text: bytes) -> Any:
    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        if len(dict(items)) != len(items):
            raise JsonRefused("duplicate")
        return dict(items)

    return json.loads(text, object_pairs_hook=pairs)


def outcome(decode: Any, text: bytes) -> Any:
    try:
        return ("ok", decode(text))
    except JsonRefused:
        return ("refused",)


@given(values, st.sampled_from(["compact", "spaced", "escaped"]))
def test_loads_answers_what_the_reference_answers(value, style):
    text = render(Pairs([("params", value)]), style).encode()
    assert outcome(loads, text) == outcome(reference, text)


@settings(max_examples=60, deadline=None)
@given(values, st.sampled_from(["compact", "spaced"]), st.integers(1, 60))
def test_loads_big_is_loads_in_pieces(value, style, copies):
    as_array = [value] * copies + [Pairs([("k", [value] * copies)])]
    as_object = Pairs([("a", [value] * copies), ("b", value), ("c", Pairs([("k", value)] * 2))])
    with small_pieces():
        for shape in (as_array, as_object, Pairs([("params", as_object), ("id", 1)])):
            text = render(shape, style).encode()
            assert outcome(loads_big, text) == outcome(reference, text)


@contextlib.contextmanager
def small_pieces() -> Iterator[None]:
    """Pieces of 64 bytes, so small examples take every path of loads_big."""
    saved = strictjson.PIECE_BYTES
    strictjson.PIECE_BYTES = 64
    try:
        yield
    finally:
        strictjson.PIECE_BYTES = saved


def test_the_probe_and_the_envelope():
    with pytest.raises(JsonRefused, match="same key twice"):
        loads(b'{"jsonrpc":"2.0","method":"m","params":{"priority":0,"priority":-5},"id":1}')
    assert loads(b'{"jsonrpc":"2.0","method":"ping","id":1}')["method"] == "ping"
    big = json.dumps(list(range(100))).encode()
    with small_pieces():
        for bad in (b"[1,2] x", b"[1,,2]", b"[1,2", b'{"a":1,}', b"[1]]", b"[\f1]"):
            with pytest.raises(msgspec.DecodeError):
                loads_big(bad + b" " * 100)
        for same in (big, b"[1]"):
            with pytest.raises(JsonRefused, match="same key twice"):
                loads_big(b'{"a":' + big + b', "b": 1, "a" :' + same + b"}")
        assert loads_big(b'{"a":' + big + b', "b": ' + big + b"}")["b"] == list(range(100))


@pytest.mark.parametrize("decode", [loads, loads_big])
def test_depth(decode):
    assert decode(b"[" * 100 + b"]" * 100) is not None
    assert decode(b"[" * MAX_DEPTH + b"]" * MAX_DEPTH) is not None
    for depth in (MAX_DEPTH + 1, 1001, 100_000):
        with pytest.raises(JsonRefused, match="nested deeper"):
            decode(b"[" * depth + b"]" * depth)
        with pytest.raises(JsonRefused, match="nested deeper"):
            decode(b'{"a":' * depth + b"1" + b"}" * depth)
