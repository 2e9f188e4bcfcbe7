"""Integers every part of the system can hold (docs/contracts.md#numbers): signed 64 bits.

Python ints are unbounded and JSON allows any size, but the journal (msgpack), the job
store and the other daemon's clients do not; a value past those bounds must be refused
at the edge, naming where it is, before it reaches a write it could fail.  (Floats:
JSON cannot carry a non-finite one; the fields that hold floats check finiteness in
validation.py.)
"""

from __future__ import annotations

from typing import Any

from client.vocabulary import INT64_MAX, INT64_MIN


def unstorable_number(value: Any, path: str) -> str | None:
    """'<path>: <problem>' for the first int outside signed 64 bits in a tree of builtins
    (dicts, lists, tuples, scalars), or None if there is none.

    Every object written passes here, so the common case (all numbers fit) is a plain
    walk that builds no paths; only a tree that fails it is walked again for the path."""
    if _fits(value):
        return None
    return _first_unstorable(value, path)


def _fits(value: Any) -> bool:
    """Whether every int in the tree fits in signed 64 bits (no paths, plain loops: the
    fast check)."""
    kind = type(value)
    if kind is int:
        return INT64_MIN <= value <= INT64_MAX
    if kind is dict:
        items: Any = value.values()
    elif kind is list or kind is tuple:
        items = value
    elif kind is str or kind is float or kind is bool or value is None:
        return True
    else:
        return _first_unstorable(value, "") is None  # a subclass: the thorough walk decides
    for item in items:  # noqa: SIM110 (a loop: all() over a generator is slower here)
        if type(item) is not str and not _fits(item):
            return False
    return True


def _first_unstorable(value: Any, path: str) -> str | None:
    """The thorough walk of `unstorable_number`, naming the path of what it finds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        if INT64_MIN <= value <= INT64_MAX:
            return None
        return f"{path}: {value} does not fit in signed 64 bits [{INT64_MIN}, {INT64_MAX}]"
    if isinstance(value, dict):
        items: Any = value.items()
    elif isinstance(value, list | tuple):
        items = enumerate(value)
    else:
        return None
    for key, item in items:
        found = _first_unstorable(
            item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]"
        )
        if found is not None:
            return found
    return None
