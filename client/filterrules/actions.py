"""The five filter actions: their wire form and the `RATE_LIMIT n` text (their names are
client.vocabulary's FILTER_ACTIONS).

Wire form: `"ACCEPT" | "PAUSE" | "REJECT" | "CONTINUE" | ["RATE_LIMIT", n]` with n a
positive integer that fits in signed 64 bits.  People write `RATE_LIMIT n` (the `lw` command
line, `replace_filter` accepts that text too); `parse_action_text` and `action_text` convert.
"""

from __future__ import annotations

import re
from typing import Any, Final, TypeAlias

from client.errors import FilterError
from client.vocabulary import INT64_MAX, WORD_FILTER_ACTIONS

_RATE_LIMIT_TEXT: Final = re.compile(r"^RATE_LIMIT\s+(\d+)$")

WireAction: TypeAlias = str | list[Any]


def _bad(text: str) -> FilterError:
    return FilterError(f"action: {text}", {"part": "action"})


def validate_action(action: Any) -> WireAction:
    """The normalized wire action; accepts the five (case-sensitive) and `"RATE_LIMIT n"` text.

    FilterError says what is wrong.
    """
    if isinstance(action, str):
        if action in WORD_FILTER_ACTIONS:
            return action
        if action.startswith("RATE_LIMIT"):
            m = _RATE_LIMIT_TEXT.match(action)
            if m is None:
                raise _bad("RATE_LIMIT argument must be a positive integer")
            return validate_action(["RATE_LIMIT", int(m.group(1))])
    elif isinstance(action, list | tuple) and action and action[0] == "RATE_LIMIT":
        n = action[1] if len(action) == 2 else None
        if isinstance(n, bool) or not isinstance(n, int) or not 0 < n <= INT64_MAX:
            raise _bad("RATE_LIMIT argument must be a positive integer below 2**63")
        return ["RATE_LIMIT", n]
    raise _bad(f'{action!r} is not one of ACCEPT, PAUSE, REJECT, CONTINUE, ["RATE_LIMIT", n]')


def parse_action_text(text: str) -> WireAction:
    """The text form: `ACCEPT` … `CONTINUE` or `RATE_LIMIT n` → the wire form."""
    stripped = text.strip()
    m = _RATE_LIMIT_TEXT.match(stripped)
    if m:
        return validate_action(["RATE_LIMIT", int(m.group(1))])
    return validate_action(stripped)


def action_text(action: WireAction) -> str:
    """The human/CLI form of a wire action: `"RATE_LIMIT 10"` for `["RATE_LIMIT", 10]`."""
    if isinstance(action, list):
        return " ".join(str(a) for a in action)
    return action
