"""Taking an opcode's locks: its LockPlan, phase by phase, through wconfd.

Phase 0 starts with cluster/BGL (shared unless the opcode needs it exclusive); a later
phase is resolved only once the earlier ones are held (the configuration it reads is then
protected).  Each phase is first tried without waiting; if it is blocked the job reports
`waiting` to luxid and waits in wconfd (`update_locks_waiting`) with the timeout and
priority of Ganeti's strategy (jobproc.locks.strategy).  On a timeout everything is
released and the plan starts again from phase 0 (a fresh `locks()` call), at the next
timeout and, once a schedule is exhausted, a more urgent priority.

A wait is interrupted by SIGTERM (cancel) or SIGUSR1 (luxid wants a word: a PAUSE rule,
a new priority).  Then the waiting request is withdrawn with `intersect_locks` of the
locks held before it, and luxid is asked what to do.

The plan and its phases are computed by the opcode's own synchronous code, which may read
the configuration through the job's stubs; so `LockTaker.acquire` runs on the job's
thread.  Calls that answer at once (try, release, luxid's reports) are blocking calls of
the job's sync stubs; only a wait runs an event loop (`run`), with an asyncio stub
(`waiter`) of the same identity, so that a signal can interrupt it.  A job whose locks
are free never creates that loop.
"""

from __future__ import annotations

import asyncio
import contextlib
import enum
import functools
import logging
import random
from collections.abc import Awaitable, Callable
from typing import Any, cast

from client import AsyncWConfdClient, WConfdClient, errors
from client.api.luxi import Check, Directive, Priority, Waiting
from client.api.wconfd import LockRequest, WaitResult
from jobproc.daemon_context import Run
from jobproc.locks.strategy import DEFAULT_SCHEDULE, LockTimeoutStrategy
from jobproc.opcodes import OpCode
from jobproc.opcodes.context import ConfigReader
from jobproc.signals import JobSignals

log = logging.getLogger(__name__)

Report = Callable[[Any], Directive]
# How long to wait for wconfd's answer to a withdrawn request.
WITHDRAW_TIMEOUT = 10.0


class Outcome(enum.Enum):
    """How taking the locks ended, besides luxid's stop directive."""

    GRANTED = "granted"
    CANCELED = "canceled"
    TIMEOUT = "timeout"
    INTERRUPTED = "interrupted"


class LockTaker:
    """Acquires lock plans for the opcodes of one job."""

    def __init__(
        self,
        wconfd: WConfdClient,
        waiter: Callable[[], AsyncWConfdClient],
        signals: JobSignals,
        report: Report,
        run: Run,
        rng: Callable[[], float] = random.random,
        schedule: tuple[float, ...] = DEFAULT_SCHEDULE,
    ) -> None:
        self.wconfd = wconfd
        self.waiter = waiter  # the asyncio stub for waits, made on first use
        self.run = run  # the event loop's run_until_complete
        self.signals = signals
        self.report = report
        self.rng = rng
        self.schedule = schedule  # the timeouts of one priority level
        self.priority = 0
        self.holding = False  # whether wconfd may hold locks of ours

    def acquire(
        self, op: OpCode[Any], index: int, priority: int, config: ConfigReader
    ) -> Outcome | Directive:
        """All of `op`'s locks (GRANTED), CANCELED, or luxid's stop Directive.

        Raises OpExecError (a phase resolver refused) or a wconfd error (a plan wconfd
        refuses: a bug of the opcode) — the opcode then fails.
        """
        strategy = LockTimeoutStrategy(priority, self.rng, self.schedule)
        self.priority = priority
        reported = False
        while True:
            if self.signals.canceled.is_set():
                return Outcome.CANCELED
            plan = op.locks(op.params, config)
            held: list[str] = []
            outcome: Outcome | Directive = Outcome.GRANTED
            for number in range(len(plan)):
                phase = plan.phase(number, config)
                if phase.release:
                    self.wconfd.try_update_locks(request=_wire(phase.release_request()))
                    held = [name for name in held if name not in phase.release]
                if not phase.acquire:
                    continue
                request = phase.acquire_request()
                self.holding = True
                if self.wconfd.try_update_locks(request=_wire(request)):  # blocked
                    if not reported:
                        reported = True
                        answer = self.report(Waiting(index=index))
                        if answer.stop:
                            return answer
                    outcome = self.run(self._wait(request, held, strategy, index))
                    if outcome is not Outcome.GRANTED:
                        break
                held += [name for name, _ in phase.acquire]
            if outcome is not Outcome.TIMEOUT:
                return outcome
            self.free()

    def free(self) -> None:
        """Release every lock of the job (and withdraw a waiting request)."""
        if self.holding:
            self.wconfd.free_locks()
            self.holding = False

    async def _wait(
        self,
        request: list[list[str]],
        held: list[str],
        strategy: LockTimeoutStrategy,
        index: int,
    ) -> Outcome | Directive:
        """Wait for one phase with the strategy's timeouts; see the module docstring."""
        while True:
            attempt = strategy.next()
            if attempt.priority != self.priority:
                self.priority = attempt.priority
                self.report(Priority(index=index, priority=attempt.priority))
            try:
                call = functools.partial(
                    self.waiter().update_locks_waiting,
                    request=request, priority=attempt.priority, timeout=attempt.timeout,
                )  # fmt: skip
                result = await self._interruptible(call, held)
            except errors.DeadlockError:
                await asyncio.sleep(0.05 + self.rng() * 0.1)  # let the other one through
                return Outcome.TIMEOUT
            if isinstance(result, WaitResult) and result.granted:
                return Outcome.GRANTED
            if self.signals.canceled.is_set():
                return Outcome.CANCELED
            answer = self.report(Check(index=index))  # blocking: the loop waits for nothing
            if answer.stop:
                return answer
            if answer.priority != self.priority:
                strategy.set_priority(answer.priority)
                self.priority = answer.priority
            if result is not Outcome.INTERRUPTED:
                return Outcome.TIMEOUT

    async def _interruptible(
        self, call: Callable[[], Awaitable[WaitResult]], held: list[str]
    ) -> WaitResult | Outcome:
        """The answer of a lock wait, or INTERRUPTED (request withdrawn) on a signal."""
        if self.signals.take_nudge() or self.signals.canceled.is_set():
            return Outcome.INTERRUPTED  # a signal came before the wait began
        task = asyncio.ensure_future(call())
        stopper = asyncio.ensure_future(self.signals.interrupt.wait())
        try:
            done, _ = await asyncio.wait({task, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if task in done:
            return task.result()
        self.signals.take_nudge()
        await self.waiter().intersect_locks(locks=held)  # withdraws the waiting request
        with contextlib.suppress(errors.RpcError, TimeoutError):
            # Answered at once: withdrawn, or granted just before (then intersect dropped it).
            await asyncio.wait_for(task, WITHDRAW_TIMEOUT)
        return Outcome.INTERRUPTED


def _wire(request: list[list[str]]) -> LockRequest:
    """A phase's `[[lock, mode], ...]` as the stub's declared type (the same JSON; wconfd
    checks the modes)."""
    return cast(LockRequest, request)
