"""OP_TEST_DELAY: wait, on lock names of nodes, to exercise queue, locks and cancel."""

from __future__ import annotations

from typing import Annotated

from msgspec import Meta

from jobproc.locks import EXCLUSIVE, LockPlan, lock
from jobproc.opcodes.base import Name, OpCode, OpParams
from jobproc.opcodes.context import ConfigReader, OpContext
from jobproc.opcodes.errors import OpExecError


class TestDelayParams(OpParams):
    """duration ≥ 0 s; on_nodes are plain lock names (the nodes need not exist)."""

    duration: Annotated[float, Meta(ge=0)]
    on_nodes: list[Name] = []
    repeat: Annotated[int, Meta(ge=0)] = 0
    fail: bool = False
    log_messages: list[str] = []


class TestDelay(OpCode[TestDelayParams]):
    """Sleep `duration` seconds while holding node/<n> exclusively for each of on_nodes.

    `repeat` as Ganeti's LUTestDelay: 0 → one delay; n ≥ 1 → n delays, each logged as
    "Test delay iteration i/n-1".  Before the delays each of `log_messages` is logged;
    after them, `fail` makes the opcode fail with "Opcode failure was requested".
    The wait is interruptible: a cancel stops it (ctx.sleep raises Canceled).
    Result: null, as Ganeti.
    """

    __test__ = False  # not a pytest test class despite the name

    OP_ID = "OP_TEST_DELAY"
    Params = TestDelayParams
    SUMMARY_FIELD = "duration"
    INTERRUPTIBLE = True

    def locks(self, params: TestDelayParams, config: ConfigReader) -> LockPlan:
        """node/<n> exclusive for each of on_nodes; no config read."""
        return LockPlan.single((lock("node", n), EXCLUSIVE) for n in params.on_nodes)

    def execute(self, ctx: OpContext) -> None:
        """Log the messages, sleep (repeatedly), then fail if asked."""
        p = self.params
        for message in p.log_messages:
            ctx.log(message)
        if p.repeat == 0:
            ctx.sleep(p.duration)
        else:
            for i in range(p.repeat):
                ctx.log(f"Test delay iteration {i}/{p.repeat - 1}")
                ctx.sleep(p.duration)
        if p.fail:
            raise OpExecError("Opcode failure was requested")
