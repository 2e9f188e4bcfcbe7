"""jobproc.locks.strategy: Ganeti's schedule, jitter bounds and escalation (properties)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from itertools import islice, pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobproc.locks.strategy import (
    DEFAULT_SCHEDULE,
    LOCK_ATTEMPTS_MAXWAIT,
    LOCK_ATTEMPTS_MINWAIT,
    LOCK_ATTEMPTS_TIMEOUT,
    Attempt,
    LockTimeoutStrategy,
    LockWaitState,
    RandomSource,
    attempt_timeouts,
    jitter,
    next_attempt,
)


def attempts(priority: int, rng: RandomSource) -> Iterator[Attempt]:
    """Every attempt from `priority` on, as the job process's loop makes them."""
    strategy = LockTimeoutStrategy(priority, rng)
    while True:
        yield strategy.next()


priorities = st.integers(min_value=-20, max_value=19)


def test_schedule_is_ganetis() -> None:
    s = DEFAULT_SCHEDULE
    assert s[0] == 5.0
    for prev, cur in pairwise(s):
        assert cur == pytest.approx(min(75.0, max(5.0, (1.05 * prev) ** 1.25)))
    assert sum(s[:-1]) < LOCK_ATTEMPTS_TIMEOUT <= sum(s)
    assert s[-1] == 75.0
    assert attempt_timeouts(1.0, 15.0, 100.0)[0] == 1.0
    with pytest.raises(ValueError):
        attempt_timeouts(0.0)


def test_jitter_bounds_and_clamping() -> None:
    assert jitter(10.0, lambda: 0.0) == pytest.approx(9.5)
    assert jitter(10.0, lambda: 0.5) == pytest.approx(10.0)
    assert jitter(10.0, lambda: 1.0) == pytest.approx(10.5)
    assert jitter(10.0, lambda: 7.0) == pytest.approx(10.5)  # a bad source is clamped


def test_first_attempts_and_escalation_point() -> None:
    rng = random.Random(1).random
    got = list(islice(attempts(0, rng), len(DEFAULT_SCHEDULE) + 1))
    assert all(a.priority == 0 for a in got[:-1])
    assert got[0].timeout == pytest.approx(5.0, rel=0.05)
    assert got[-1].priority == -1  # the schedule restarted one step more urgent
    assert got[-1].timeout == pytest.approx(5.0, rel=0.051)


def test_priority_change_restarts_the_schedule() -> None:
    strategy = LockTimeoutStrategy(3, random.Random(2).random)
    for _ in range(5):
        strategy.next()
    strategy.set_priority(10)
    attempt = strategy.next()
    assert attempt.priority == 10 and attempt.timeout == pytest.approx(5.0, rel=0.051)
    assert strategy.priority == 10


def test_state_validation() -> None:
    with pytest.raises(ValueError):
        LockWaitState(-21)
    with pytest.raises(ValueError):
        LockWaitState(20)
    with pytest.raises(ValueError):
        next_attempt(LockWaitState(0), random.random, schedule=())


@settings(max_examples=60, deadline=None)
@given(priority=priorities, seed=st.integers(0, 2**32))
def test_invariants_over_a_whole_run(priority: int, seed: int) -> None:
    """Timeouts stay in range, priority never gets less urgent, the end is unbounded at -20."""
    rnd = random.Random(seed)
    bounded = (priority + 21) * len(DEFAULT_SCHEDULE)
    run = list(islice(attempts(priority, rnd.random), bounded + 3))
    last_priority = priority
    for i, attempt in enumerate(run):
        assert isinstance(attempt, Attempt)
        assert attempt.priority <= last_priority
        assert attempt.priority >= last_priority - 1  # one step at a time
        last_priority = attempt.priority
        if i < bounded:
            assert attempt.timeout is not None
            assert 0.95 * LOCK_ATTEMPTS_MINWAIT <= attempt.timeout <= 1.05 * LOCK_ATTEMPTS_MAXWAIT
            base = DEFAULT_SCHEDULE[i % len(DEFAULT_SCHEDULE)]
            assert 0.95 * base - 1e-9 <= attempt.timeout <= 1.05 * base + 1e-9
            assert attempt.priority == priority - i // len(DEFAULT_SCHEDULE)
        else:
            assert attempt == Attempt(None, -20)


@settings(max_examples=100, deadline=None)
@given(priority=priorities, index=st.integers(0, 40), r=st.floats(0, 1))
def test_next_attempt_is_pure(priority: int, index: int, r: float) -> None:
    state = LockWaitState(priority, index)
    first = next_attempt(state, lambda: r)
    assert next_attempt(state, lambda: r) == first  # same input, same output
    assert state == LockWaitState(priority, index)  # input untouched
    attempt, new = first
    assert new.priority == attempt.priority <= priority
