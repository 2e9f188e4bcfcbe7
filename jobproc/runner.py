"""The job process's main loop (docs/contracts.md#job-processes-and-opcodes): one job, its
opcodes in order.

    the first directive: from the zygote (luxid sent it with the spawn request) or,
        for a process started by exec, luxid's answer to `hello` (the opcodes and where
        to start, or to stop)
    for each opcode luxid says to run:
        take its locks (jobproc.locks.acquire; `waiting` is reported only if they are
            not free)
        report `running` — luxid's durable answer is the gate: no opcode runs twice
        execute it with a DaemonOpContext (jobproc.daemon_context)
        release its locks (and, if the job ends, its reservations), report the end;
            luxid answers the next opcode or stop
    exit, without closing anything: the kernel closes the connections (and wconfd's
        death detection, docs/contracts.md#death-detection, releases whatever a failed call
        left held)

A job process has one thread and no thread is started: a forked job's CPU goes to its
work.  Daemon calls are blocking calls of sync stubs; an event loop is made only when
the job must wait interruptibly — for locks that are not free, in an interruptible
sleep — so a job whose locks are free pays for no loop and no asyncio streams (half of a
short job's CPU).  Signal handlers are plain Python ones (jobproc.signals): they run
during blocking calls and waits alike.

Cancel (SIGTERM) is honoured before an opcode, during a lock wait and inside interruptible
opcodes; a paused job stops at the next safe point.  luxid may restart at any time: every
report is idempotent and is re-sent until luxid answers it, so the job goes on once luxid
is back (holding the locks of the opcode it reports on meanwhile).
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
import time
from collections.abc import Awaitable
from typing import Any, TypeVar

import msgspec

from client import AsyncWConfdClient, LuxiClient, WConfdClient, errors, paths
from client.api.luxi import Directive, Finish, Hello, Opcode, Running
from client.vocabulary import FinalizedStatus
from jobproc.daemon_context import DaemonOpContext
from jobproc.locks.acquire import LockTaker, Outcome
from jobproc.opcodes import Canceled, OpCode, OpExecError, build_opcode
from jobproc.signals import JobSignals
from jobproc.timeline import Timeline

log = logging.getLogger(__name__)

# Back-off while luxid cannot be reached (a restart): starts small, stays below a second.
RETRY_MIN, RETRY_MAX = 0.02, 1.0
# How long a job process waits for an unreachable luxid (seconds; see JobRunner.report).
HELLO_PATIENCE = float(os.environ.get("LW_JOB_HELLO_PATIENCE", "30"))
JOB_PATIENCE = float(os.environ.get("LW_JOB_PATIENCE", "600"))
T = TypeVar("T")
_handler: logging.StreamHandler[Any] | None = None  # set up once per process (or zygote)
_who = "zygote"  # who logs: the zygote or "job-<id>" (see setup_logging)


def setup_logging(job_id: int | None) -> None:
    """One line per event on stderr (luxid's, so the daemon's log or journal has them).

    A child of the zygote keeps the zygote's handler, formatter and level and only names
    itself (a formatter built per job would cost a fifth of a millisecond).
    """
    global _handler, _who
    _who = f"job-{job_id}" if job_id is not None else "zygote"
    if _handler is not None:
        return
    prefix = "" if os.environ.get("JOURNAL_STREAM") else "%(asctime)s "
    _handler = logging.StreamHandler(sys.stderr)
    _handler.setFormatter(
        logging.Formatter(f"{prefix}jobproc[%(process)d] %(who)s %(levelname)s: %(message)s")
    )
    _handler.addFilter(_name_the_process)
    root = logging.getLogger()
    root.handlers[:] = [_handler]
    root.setLevel(os.environ.get("LW_LOG_LEVEL", "INFO"))


def _name_the_process(record: logging.LogRecord) -> bool:
    """The handler's filter: every record says which process logged it."""
    record.who = _who
    return True


def run_job(
    job_id: int,
    run_dir: str | os.PathLike[str] | None,
    first: Directive | None = None,
    forked: float | None = None,
) -> int:
    """Run job `job_id` in this process; the exit code.

    `first`: luxid's first directive if it came with the spawn request (else the job
    asks with `hello`).  `forked`: when the zygote forked this process; its caller then
    ends the process at once (os._exit), so the orderly teardown is skipped.
    """
    setup_logging(job_id)
    runner = JobRunner(job_id, run_dir, Timeline(job_id, forked))
    code = runner.run(first)
    if forked is None:
        runner.close()
    return code


class JobRunner:
    """Runs job `job_id` to its end, as its luxid directs."""

    def __init__(
        self,
        job_id: int,
        run_dir: str | os.PathLike[str] | None,
        timeline: Timeline,
    ) -> None:
        self.job_id = job_id
        # luxid: `report` decides how long to wait (HELLO_PATIENCE, JOB_PATIENCE).  wconfd
        # must exist while a job runs: its stub waits out a restart, even at the start.
        self.luxi = LuxiClient(
            paths.luxid_socket(run_dir), patience=HELLO_PATIENCE, actor=f"job:{job_id}"
        )
        self.wconfd_socket = paths.wconfd_socket(run_dir)
        self.wconfd = WConfdClient(self.wconfd_socket, job_id=job_id, expect_daemon=True)
        self.signals = JobSignals()
        self.locks = LockTaker(self.wconfd, self.waiter, self.signals, self.report, self.wait)
        self.timeline = timeline
        self.acknowledged = False  # luxid has answered this process once
        self.reserved = False  # an opcode reserved something in wconfd
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: AsyncWConfdClient | None = None

    def wait(self, call: Awaitable[T]) -> T:
        """Run the job's event loop (made on first use) until `call` is done; its result."""
        if self._loop is None:
            # asyncio's own loop: it serves only waits, where uvloop saves nothing, and
            # leaving uvloop out keeps the zygote smaller (its fork costs per MB).
            self._loop = asyncio.new_event_loop()
            asyncio.set_event_loop(self._loop)
            self.signals.loop = self._loop
        return self._loop.run_until_complete(call)

    def waiter(self) -> AsyncWConfdClient:
        """The asyncio wconfd stub for lock waits (same identity, its own connection)."""
        if self._waiter is None:
            self._waiter = AsyncWConfdClient(
                self.wconfd_socket, job_id=self.job_id, expect_daemon=True
            )
        return self._waiter

    def run(self, first: Directive | None = None) -> int:
        """Run the job; the process's exit code (0 also when the job failed or stopped)."""
        self.signals.install()
        self.timeline.mark("loop")
        try:
            answer = first if first is not None else self.report(Hello())
            self.timeline.mark("hello")
            ops = answer.ops or []
            while not answer.stop and answer.index is not None:
                last = answer.index == len(ops) - 1
                answer = self.run_opcode(answer.index, ops[answer.index], answer.priority, last)
            return 0
        except errors.RpcError as exc:
            log.error("job %d: %s; stopping", self.job_id, exc)
            return 1
        finally:
            self.timeline.report()

    def report(self, event: Any) -> Directive:
        """Send a report to luxid until it answers (see the module docstring).

        While luxid cannot be reached (a restart) the report is re-sent with a back-off,
        for up to `HELLO_PATIENCE` before luxid has answered this process at all (an
        orphan of a luxid that died before recording it must not linger) and
        `JOB_PATIENCE` afterwards; then ConnectionError ends the process, which frees its
        locks (a restarted luxid then finds the job's process dead). On etcd a
        NotMaster naming no master (an election under way) or luxid's own node (a restarted
        luxid still loading its term) is waited out the same way; one naming another node
        ends the process (that node's takeover has dealt with the job).
        """
        patience = JOB_PATIENCE if self.acknowledged else HELLO_PATIENCE
        deadline = time.monotonic() + patience
        delay = RETRY_MIN
        while True:
            try:
                answer: Directive = self.luxi.job_report(job_id=self.job_id, event=event)
                self.acknowledged = True
                return answer
            except (errors.ConnectionError, errors.NotMaster) as exc:
                if isinstance(exc, errors.NotMaster) and not self._luxid_settling():
                    raise
                if time.monotonic() > deadline:
                    raise errors.ConnectionError(
                        f"luxid unreachable for {patience:.0f} s; giving up the job"
                    ) from exc
                if delay == RETRY_MIN:
                    log.warning("job %d: luxid unreachable (%s); retrying", self.job_id, exc)
                time.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)

    def _luxid_settling(self) -> bool:
        """After a NotMaster: whether it is passing (luxid's get_role names no master, or
        its own node, whose term is still loading)."""
        try:
            role = self.luxi.get_role()
        except errors.RpcError:
            return True  # luxid went away again: the retry finds out
        return role.master is None or role.master == role.node

    def run_opcode(self, index: int, op_input: Opcode, priority: int, last: bool) -> Directive:
        """One opcode from its locks to its reported end; luxid's next directive.

        Its locks are released before its end is reported, so that a job seen final
        holds nothing; its reservations too if the job ends with it (`last`, or failed).
        """
        if self.signals.canceled.is_set():
            return self.report(Finish(index=index, status="canceled"))
        try:
            op = build_opcode(op_input)
        except errors.InvalidOpcode as exc:
            return self.report(Finish(index=index, status="error", result=exc.message))
        ctx = DaemonOpContext(
            self.wait, self.job_id, index, priority, self.wconfd, self.luxi, self.report,
            self.signals, op.INTERRUPTIBLE,
        )  # fmt: skip
        outcome: Outcome | Directive | Finish
        try:
            outcome = self.locks.acquire(op, index, priority, ctx)
        except OpExecError as exc:
            outcome = Finish(index=index, status="error", result=exc.message)
        except errors.RpcError as exc:
            message = f"cannot take the locks of {op.OP_ID}: {exc.message}"
            outcome = Finish(index=index, status="error", result=message)
        if outcome is not Outcome.GRANTED:
            self.locks.free()
            if isinstance(outcome, Directive):
                return outcome
            if not isinstance(outcome, Finish):
                outcome = Finish(index=index, status="canceled")
            return self.report(outcome)
        self.timeline.mark("locked")
        answer = self.report(Running(index=index))
        self.timeline.mark("running")
        if answer.stop:
            self.locks.free()
            return answer
        ctx.set_priority(self.locks.priority)
        status, result = _execute(op, ctx)
        self.timeline.mark("executed")
        self.reserved = self.reserved or ctx.reserved
        ending = self.reserved and (last or status != "success")
        return self.end(Finish(index=index, status=status, result=result), ending)

    def end(self, finish: Finish, release_reservations: bool) -> Directive:
        """Release the opcode's locks (and the job's reservations), then report its end."""
        self.locks.free()
        if release_reservations:
            self.wconfd.release_reservations()
        self.timeline.mark("released")
        answer = self.report(finish)
        self.timeline.mark("finished")
        return answer

    def close(self) -> None:
        """Close the connections and the loop (a process that is not about to exit)."""
        self.luxi.close()
        self.wconfd.close()
        if self._loop is not None:
            if self._waiter is not None:
                self._loop.run_until_complete(self._waiter.close())
            self._loop.close()


def _execute(op: OpCode[Any], ctx: DaemonOpContext) -> tuple[FinalizedStatus, Any]:
    """Run the opcode; (status, result) for the Finish report."""
    try:
        return "success", msgspec.to_builtins(op.execute(ctx))
    except Canceled:
        return "canceled", None
    except OpExecError as exc:
        return "error", exc.message
    except errors.RpcError as exc:
        return "error", f"{exc.type_name}: {exc.message}"
    except Exception as exc:
        log.exception("job %d: %s failed", ctx.job_id, op.OP_ID)
        return "error", f"internal error in {op.OP_ID}: {type(exc).__name__}: {exc}"
