"""The job process's main loop (SPEC §7): one job, its opcodes in order.

    hello → luxid answers the opcodes and where to start (or to stop)
    for each opcode luxid says to run:
        take its locks (jobproc.acquire; `waiting` is reported only if they are not free)
        report `running` — luxid's durable answer is the gate: no opcode runs twice
        execute it in a worker thread with a JobContext (jobproc.adapter)
        release its locks, report the end; luxid answers the next opcode or stop

Cancel (SIGTERM) is honoured before an opcode, during a lock wait and inside interruptible
opcodes; a paused job stops at the next safe point.  luxid may restart at any time: every
report is idempotent and is re-sent until luxid answers it, so the job goes on once luxid
is back.  Locks and reservations are released before the process exits (wconfd would
release them at its death anyway).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from typing import Any, Literal

import msgspec

from client import AsyncLuxiClient, AsyncWConfdClient, errors, paths
from client.api.luxi import Directive, Finish, Hello, Running
from jobproc.acquire import LockTaker, Outcome
from jobproc.adapter import JobContext
from jobproc.opcodes import Canceled, OpCode, OpExecError, build_opcode
from jobproc.signals import JobSignals

log = logging.getLogger(__name__)

# Back-off while luxid cannot be reached (a restart): starts small, stays below a second.
RETRY_MIN, RETRY_MAX = 0.02, 1.0
# How long a job process waits for an unreachable luxid (seconds; see JobRunner.report).
HELLO_PATIENCE = float(os.environ.get("LW_JOB_HELLO_PATIENCE", "30"))
JOB_PATIENCE = float(os.environ.get("LW_JOB_PATIENCE", "600"))
# How long the final release of locks and reservations may wait for wconfd (seconds).
CLEANUP_PATIENCE = 10.0
FinishStatus = Literal["success", "error", "canceled"]


class JobRunner:
    """Runs job `job_id` to its end, as its luxid directs."""

    def __init__(self, job_id: int, run_dir: str | os.PathLike[str] | None = None) -> None:
        self.job_id = job_id
        # luxid: `report` decides how long to wait (HELLO_PATIENCE, JOB_PATIENCE).  wconfd
        # must exist while a job runs: its stub waits out a restart, even at the start.
        self.luxi = AsyncLuxiClient(paths.luxid_socket(run_dir), patience=HELLO_PATIENCE)
        self.wconfd = AsyncWConfdClient(
            paths.wconfd_socket(run_dir), job_id=job_id, expect_daemon=True
        )
        self.signals = JobSignals()
        self.locks = LockTaker(self.wconfd, self.signals, self.report)
        self.reserved = False
        self.acknowledged = False  # luxid has answered this process once

    async def main(self) -> int:
        """Run the job; the process's exit code (0 also when the job failed or stopped)."""
        self.signals.install(asyncio.get_running_loop())
        # Connect and identify to wconfd while luxid answers the hello.
        warm = asyncio.ensure_future(self.wconfd.ping())
        try:
            answer = await self.report(Hello())
            ops = answer.ops or []
            while not answer.stop and answer.index is not None:
                answer = await self.run_opcode(answer.index, ops[answer.index], answer.priority)
            return 0
        except errors.RpcError as exc:
            log.error("job %d: %s; stopping", self.job_id, exc)
            return 1
        finally:
            await asyncio.gather(warm, return_exceptions=True)
            await self._cleanup()

    async def report(self, event: Any) -> Directive:
        """Send a report to luxid until it answers (see the module docstring).

        While luxid cannot be reached (a restart) the report is re-sent with a back-off,
        for up to `HELLO_PATIENCE` before luxid has answered this process at all (an
        orphan of a luxid that died before recording it must not linger) and
        `JOB_PATIENCE` afterwards; then ConnectionError ends the process, which frees its
        locks (a restarted luxid then finds the job's process dead).
        """
        patience = JOB_PATIENCE if self.acknowledged else HELLO_PATIENCE
        deadline = time.monotonic() + patience
        delay = RETRY_MIN
        while True:
            try:
                answer: Directive = await self.luxi.job_report(job_id=self.job_id, event=event)
                self.acknowledged = True
                return answer
            except errors.ConnectionError as exc:
                if time.monotonic() > deadline:
                    raise errors.ConnectionError(
                        f"luxid unreachable for {patience:.0f} s; giving up the job"
                    ) from exc
                if delay == RETRY_MIN:
                    log.warning("job %d: luxid unreachable (%s); retrying", self.job_id, exc)
                await asyncio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)

    async def run_opcode(self, index: int, op_input: dict[str, Any], priority: int) -> Directive:
        """One opcode from its locks to its reported end; luxid's next directive."""
        if self.signals.canceled.is_set():
            return await self.report(Finish(index=index, status="canceled"))
        try:
            op = build_opcode(op_input)
        except errors.InvalidOpcode as exc:
            return await self.report(Finish(index=index, status="error", result=exc.message))
        ctx = JobContext(
            asyncio.get_running_loop(), self.job_id, index, priority, self.wconfd,
            self.luxi, self.report, self.signals.canceled, op.INTERRUPTIBLE,
        )  # fmt: skip
        outcome: Outcome | Directive | Finish
        try:
            outcome = await self.locks.acquire(op, index, priority, ctx)
        except OpExecError as exc:
            outcome = Finish(index=index, status="error", result=exc.message)
        except errors.RpcError as exc:
            message = f"cannot take the locks of {op.OP_ID}: {exc.message}"
            outcome = Finish(index=index, status="error", result=message)
        if outcome is not Outcome.GRANTED:
            await self.locks.free()
            if isinstance(outcome, Directive):
                return outcome
            if isinstance(outcome, Finish):
                return await self.report(outcome)
            return await self.report(Finish(index=index, status="canceled"))
        answer = await self.report(Running(index=index))
        if answer.stop:
            await self.locks.free()
            return answer
        ctx.set_priority(self.locks.priority)
        status, result = await asyncio.to_thread(_execute, op, ctx)
        self.reserved = self.reserved or ctx.reserved
        await self.locks.free()
        return await self.report(Finish(index=index, status=status, result=result))

    async def _cleanup(self) -> None:
        """Release what wconfd holds for the job and close the connections.

        Bounded by CLEANUP_PATIENCE, not the stub's patience: the job's outcome is reported
        already, and wconfd releases everything of a process that has exited anyway.
        """
        try:
            async with asyncio.timeout(CLEANUP_PATIENCE):
                await self.locks.free()
                if self.reserved:
                    await self.wconfd.release_reservations()
        except (errors.RpcError, TimeoutError) as exc:
            log.warning("job %d: cleanup: %r (wconfd releases at exit)", self.job_id, exc)
        await self.luxi.close()
        await self.wconfd.close()


def _execute(op: OpCode[Any], ctx: JobContext) -> tuple[FinishStatus, Any]:
    """Worker thread: run the opcode; (status, result) for the Finish report."""
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
