"""The numbers a client may send (docs/contracts.md#numbers): signed 64-bit integers, finite floats.

The daemons keep what clients send in a journal, a snapshot and an SQLite job store, none
of which can hold a 65-bit integer or an infinity; a bad number that got past the edge
would fail later, inside a write shared with other clients.  So every param is checked at
the edge, before the method runs: `check_numbers` walks a param's plain JSON value and
names the path of the first number out of range (e.g. `ops[0].duration`).

The JSON decoder turns a literal beyond a double (`1e400`) into an infinity instead of
refusing the whole message, so that too is answered here, as InvalidParams with the
request's own id.  The range types below carry each param's own range into the
declarations as msgspec `Meta` constraints.
"""

from __future__ import annotations

import math
from typing import Annotated, Any

from msgspec import Meta

from client.errors import InvalidParams
from client.vocabulary import INT64_MAX, INT64_MIN, PRIORITY_MAX, PRIORITY_MIN

Priority = Annotated[int, Meta(ge=PRIORITY_MIN, le=PRIORITY_MAX)]
"""A lock-request, opcode or job priority: -20 (most urgent) … 19."""
Count = Annotated[int, Meta(ge=0)]
"""A number of things (≥ 0)."""
Seconds = Annotated[float, Meta(ge=0)]
"""A duration or timeout in seconds (≥ 0)."""
JobId = Annotated[int, Meta(ge=0)]
"""A job id as a param (job ids are positive; 0 names no job)."""
Serial = Annotated[int, Meta(ge=0)]
"""A serial number (config serial_no, log serial) (≥ 0)."""


def check_numbers(method: str, params: dict[str, Any]) -> None:
    """InvalidParams naming the first integer beyond signed 64 bits or non-finite float."""
    for name, value in params.items():
        if type(value) is str:
            continue
        try:
            fine = _fine(value)
        except RecursionError:
            fine = False
        if not fine:
            path, why = _first_bad(value, name)
            raise InvalidParams(f"{method}: param `{path}`: {why}", {"param": name})


def _fine(value: Any) -> bool:
    """Whether every number inside `value` may be sent (the fast path: no paths built;
    plain loops, as this runs on every call)."""
    kind = type(value)
    if kind is int:
        return INT64_MIN <= value <= INT64_MAX
    if kind is float:
        return math.isfinite(value)
    if kind is list:
        for item in value:
            if type(item) is not str and not _fine(item):
                return False
    elif kind is dict:
        for item in value.values():
            if type(item) is not str and not _fine(item):
                return False
    return True


def _first_bad(value: Any, path: str) -> tuple[str, str]:
    """(path, why) of the first bad number inside a value `_fine` refused."""
    try:
        found = _walk(value, path)
    except RecursionError:
        found = None
    return found or (path, "nested too deeply")


def _walk(value: Any, path: str) -> tuple[str, str] | None:
    kind = type(value)
    if kind is int:
        if INT64_MIN <= value <= INT64_MAX:
            return None
        return path, f"integer {_short(value)} does not fit in signed 64 bits"
    if kind is float:
        return None if math.isfinite(value) else (path, f"number {value} is not finite")
    items = enumerate(value) if kind is list else value.items() if kind is dict else ()
    for key, item in items:
        if type(item) is not str:
            found = _walk(item, f"{path}[{key}]" if kind is list else f"{path}.{key}")
            if found is not None:
                return found
    return None


def _short(value: int) -> str:
    """An integer for a message: itself, or its size when it is very long."""
    text = str(value) if value.bit_length() < 256 else ""
    return text or f"of {value.bit_length()} bits"
