"""Failed-login throttling (docs/operations.md#rapi-users-roles-and-tokens), a pure
structure: no clock, no I/O; lw-rapi's authorizer passes the time in.

Once `limit` authentications failed for one key (a user name, an address) within `window`
seconds, every further attempt involving that key is refused until the oldest of those
failures is `window` seconds old.  A refused attempt is not itself a failure, so a key
never holds more than `limit` failures within a window: keeping the last `limit` times
per key is exact.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable, Iterable

LIMIT = 10
WINDOW = 60.0
MAX_KEYS = 100_000  # keys kept at most (expired ones go first), so memory stays bounded


class Throttle:
    """Recent failures per key."""

    def __init__(self, limit: int = LIMIT, window: float = WINDOW, max_keys: int = MAX_KEYS):
        self.limit = limit
        self.window = window
        self.max_keys = max_keys
        self._failures: dict[Hashable, deque[float]] = {}

    def retry_after(self, keys: Iterable[Hashable], now: float) -> int | None:
        """Whole seconds (at least 1) until an attempt for `keys` may be made again, or None
        if it may be made now."""
        waits = [wait for key in keys if (wait := self._wait(key, now)) is not None]
        return max(waits, default=None)

    def _wait(self, key: Hashable, now: float) -> int | None:
        times = self._failures.get(key)
        if times is None or len(times) < self.limit:
            return None
        until = times[0] + self.window
        if now >= until:
            return None
        return max(1, math.ceil(until - now))

    def failed(self, keys: Iterable[Hashable], now: float) -> None:
        """Record one failed authentication for each of `keys`."""
        for key in keys:
            times = self._failures.get(key)
            if times is None:
                if len(self._failures) >= self.max_keys:
                    self._forget(now)
                times = self._failures[key] = deque(maxlen=self.limit)
            times.append(now)

    def _forget(self, now: float) -> None:
        """Drop keys whose failures are all older than the window; if that is not enough,
        the keys that first failed longest ago (first in the table)."""
        for key in [k for k, t in self._failures.items() if now - t[-1] >= self.window]:
            del self._failures[key]
        while len(self._failures) >= self.max_keys:
            del self._failures[next(iter(self._failures))]
