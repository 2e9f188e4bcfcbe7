"""Integers every part of the system can hold (SPEC §3): signed 64 bits.

Python ints are unbounded and JSON allows any size, but the journal (msgpack), the job
store and the other daemon's clients do not; a value past those bounds must be refused
at the edge, naming where it is, before it reaches a write it could fail.  (Floats:
JSON cannot carry a non-finite one; the fields that hold floats check finiteness in
validation.py.)
"""

from __future__ import annotations

from typing import Any, Final

INT64_MIN: Final = -(1 << 63)
INT64_MAX: Final = (1 << 63) - 1


def unstorable_number(value: Any, path: str) -> str | None:
    """'<path>: <problem>' for the first int outside signed 64 bits in a tree of builtins
    (dicts, lists, tuples, scalars), or None if there is none."""
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
        found = unstorable_number(
            item, f"{path}.{key}" if isinstance(key, str) else f"{path}[{key}]"
        )
        if found is not None:
            return found
    return None
