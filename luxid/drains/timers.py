"""The deadline timer heap: a deadline fires within 100 ms (docs/contracts.md#node-drain), a
scheduled drain starts at its start time (docs/contracts.md#scheduled-drains).

Pure data: the shell keeps one `DeadlineHeap`, sets each drain's next timer after every
step (`next_timer`), arms one event-loop timer for `peek()`, and when it fires runs a step
for the drains `pop_due(now)` returns.  Deadlines and start times are absolute times stored in
the records, so after a restart the heap is rebuilt from them and one already past fires at
once.
"""

from __future__ import annotations

import heapq

from luxid.drains.record import DrainRecord


def next_timer(record: DrainRecord) -> float | None:
    """When the drain needs a step with no other event: a scheduled drain's start time;
    its deadline until it fired, then (queue drains) the time canceled jobs still running
    are killed."""
    if record.status == "scheduled":
        return record.start_at
    if record.status != "draining":
        return None
    if record.deadline is not None and not record.deadline_reached:
        return record.deadline
    return record.kill_at


class DeadlineHeap:
    """Drain targets by their next timer; setting a target again replaces its timer.

    Replaced entries stay in the heap and are skipped when they surface (lazy deletion),
    so every operation is O(log n).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, str]] = []
        self._when: dict[str, float] = {}

    def set(self, target: str, when: float | None) -> None:
        """Fire `target` at `when`; None removes its timer."""
        if when is None:
            self._when.pop(target, None)
            return
        if self._when.get(target) == when:
            return
        self._when[target] = when
        heapq.heappush(self._heap, (when, target))

    def _drop_stale(self) -> None:
        while self._heap and self._when.get(self._heap[0][1]) != self._heap[0][0]:
            heapq.heappop(self._heap)

    def peek(self) -> float | None:
        """The earliest timer, if any."""
        self._drop_stale()
        return self._heap[0][0] if self._heap else None

    def pop_due(self, now: float) -> list[str]:
        """The targets whose timer is at or before `now`, earliest first (removed)."""
        due: list[str] = []
        self._drop_stale()
        while self._heap and self._heap[0][0] <= now:
            _, target = heapq.heappop(self._heap)
            del self._when[target]
            due.append(target)
            self._drop_stale()
        return due

    def __len__(self) -> int:
        return len(self._when)
