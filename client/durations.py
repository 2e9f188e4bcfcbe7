"""Durations as operators write them: `90s`, `15m`, `2h`, `1h30m`, `1d`.

A duration is one or more `<integer><unit>` parts with units d, h, m, s, each at most once
and from the largest to the smallest (`1h30m`, not `30m1h`), or a bare number of seconds
(`90`, `2.5`).  `format_duration` writes the canonical form back (`5400` -> `1h30m`), so
`parse_duration(format_duration(n)) == n` for every whole number of seconds.
"""

from __future__ import annotations

import math
import re
from typing import Final

UNITS: Final = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_PART = re.compile(r"(\d+)([dhms])")
_EXAMPLES: Final = "e.g. 90s, 15m, 2h, 1h30m"
MAX_SECONDS: Final = 100 * 365 * 86400  # a century: any longer is a typo, and stays finite


def parse_duration(text: str) -> float:
    """Seconds in `text`; ValueError saying what is wrong with it."""
    spec = text.strip().lower()
    try:
        seconds = float(spec)
    except ValueError:
        pass
    else:
        if not math.isfinite(seconds) or not 0 <= seconds <= MAX_SECONDS:
            raise ValueError(f"not a duration: {text!r} (0 to {MAX_SECONDS} seconds; {_EXAMPLES})")
        return seconds
    order = [unit for unit, _ in UNITS]
    total = 0
    last = -1
    pos = 0
    for match in _PART.finditer(spec):
        if match.start() != pos:
            break
        rank = order.index(match.group(2))
        if rank <= last:
            raise ValueError(
                f"not a duration: {text!r} (each unit once, largest first; {_EXAMPLES})"
            )
        last = rank
        total += int(match.group(1)) * UNITS[rank][1]
        pos = match.end()
    if pos == 0 or pos != len(spec):
        raise ValueError(f"not a duration: {text!r} ({_EXAMPLES})")
    if total > MAX_SECONDS:
        raise ValueError(f"not a duration: {text!r} (at most {MAX_SECONDS} seconds)")
    return float(total)


def format_duration(seconds: float) -> str:
    """The canonical form of a duration, rounded to whole seconds: `1h30m`, `90` -> `1m30s`,
    `0` -> `0s`."""
    left = max(0, round(seconds))
    parts = []
    for unit, size in UNITS:
        count, left = divmod(left, size)
        if count:
            parts.append(f"{count}{unit}")
    return "".join(parts) or "0s"
