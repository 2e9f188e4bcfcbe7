"""Lock-acquisition timeouts and priority escalation for ``update_locks_waiting`` (pure).

Ganeti's mcpu strategy (mcpu.py
`_CalculateLockAttemptTimeouts`, jqueue `CheckPriorityIncrease`):

- the schedule is 5 s, then ``min(75, max(5, (1.05 * previous) ** 1.25))`` for each next
  attempt, until the schedule's (un-jittered) total reaches 1800 s;
- every timeout gets ±5 % jitter so that jobs fighting for the same locks drift apart;
- when an opcode's schedule is exhausted and its priority is above -20, the priority is
  lowered by one (more urgent) and the schedule starts again;
- at -20 an exhausted schedule means waiting without a bound (``timeout=None``).

So an opcode at priority p makes ``(p + 21) * len(schedule)`` bounded attempts and then
waits forever at -20 (about 10.5 hours from the default priority 0, as Ganeti).

No clock, no I/O: the random source is a parameter (``random.Random(seed).random``).
The job process loop:

    state = LockWaitState(priority=opcode_priority)
    while True:
        attempt, state = next_attempt(state, rng)
        result = wconfd.update_locks_waiting(request, priority=attempt.priority,
                                             timeout=attempt.timeout)
        if result["granted"]: break
        # report attempt.priority to luxid if it changed (oppriority)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import NamedTuple

from client.vocabulary import PRIORITY_MAX, PRIORITY_MIN

LOCK_ATTEMPTS_MINWAIT = 5.0
LOCK_ATTEMPTS_MAXWAIT = 75.0
# Ganeti: 10 hours / (the default priority - the most urgent) = 36000 / 20.
LOCK_ATTEMPTS_TIMEOUT = 1800.0
JITTER = 0.05  # ±5 %

RandomSource = Callable[[], float]
"""Returns a float in [0, 1), like random.random."""


@lru_cache(maxsize=16)
def attempt_timeouts(
    minwait: float = LOCK_ATTEMPTS_MINWAIT,
    maxwait: float = LOCK_ATTEMPTS_MAXWAIT,
    total: float = LOCK_ATTEMPTS_TIMEOUT,
) -> tuple[float, ...]:
    """The un-jittered schedule of one priority level (Ganeti's formula)."""
    if not 0 < minwait <= maxwait:
        raise ValueError("need 0 < minwait <= maxwait")
    result = [minwait]
    running = minwait
    while running < total:
        timeout = min(maxwait, max(minwait, (result[-1] * 1.05) ** 1.25))
        result.append(timeout)
        running += timeout
    return tuple(result)


DEFAULT_SCHEDULE = attempt_timeouts()


def jitter(timeout: float, rng: RandomSource) -> float:
    """`timeout` moved by up to ±5 % (uniform); the random value is clamped to [0, 1]."""
    r = min(1.0, max(0.0, rng()))
    return timeout * (1.0 - JITTER + 2 * JITTER * r)


class Attempt(NamedTuple):
    """One ``update_locks_waiting`` call: its timeout (None: no bound) and priority."""

    timeout: float | None
    priority: int


@dataclass(frozen=True)
class LockWaitState:
    """Where an opcode is in the strategy: its priority and the next schedule index."""

    priority: int
    index: int = 0

    def __post_init__(self) -> None:
        if not PRIORITY_MIN <= self.priority <= PRIORITY_MAX:
            raise ValueError(f"priority {self.priority} is outside {PRIORITY_MIN}..{PRIORITY_MAX}")
        if self.index < 0:
            raise ValueError("index must be >= 0")


def next_attempt(
    state: LockWaitState,
    rng: RandomSource,
    schedule: tuple[float, ...] = DEFAULT_SCHEDULE,
) -> tuple[Attempt, LockWaitState]:
    """The next attempt after `state` timed out (or the first one), and the new state."""
    if not schedule:
        raise ValueError("the schedule must not be empty")
    if state.index < len(schedule):
        attempt = Attempt(jitter(schedule[state.index], rng), state.priority)
        return attempt, replace(state, index=state.index + 1)
    if state.priority > PRIORITY_MIN:
        priority = state.priority - 1
        return Attempt(jitter(schedule[0], rng), priority), LockWaitState(priority, 1)
    return Attempt(None, PRIORITY_MIN), state


def change_priority(state: LockWaitState, priority: int) -> LockWaitState:
    """The state after luxid changed the opcode's priority: the schedule starts again."""
    return LockWaitState(priority, 0)


class LockTimeoutStrategy:
    """A mutable convenience wrapper over `next_attempt` for the job process's loop."""

    def __init__(
        self,
        priority: int,
        rng: RandomSource,
        schedule: tuple[float, ...] = DEFAULT_SCHEDULE,
    ) -> None:
        self.state = LockWaitState(priority)
        self._rng = rng
        self._schedule = schedule

    @property
    def priority(self) -> int:
        """The priority of the last attempt (the opcode's current priority)."""
        return self.state.priority

    def next(self) -> Attempt:
        """The next attempt's timeout and priority."""
        attempt, self.state = next_attempt(self.state, self._rng, self._schedule)
        return attempt

    def set_priority(self, priority: int) -> None:
        """Apply a priority change from luxid; the schedule starts again."""
        self.state = change_priority(self.state, priority)
