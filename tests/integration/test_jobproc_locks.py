"""jobproc's lock taking (jobproc.acquire) against a real wconfd, with a fast timeout
schedule: timeouts release everything and start again, exhausted schedules raise the
priority (reported to luxid), signals interrupt a wait and withdraw its request."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from client import AsyncWConfdClient, WConfdClient
from client.api.luxi import Check, Directive, Priority, Waiting
from jobproc.acquire import LockTaker, Outcome
from jobproc.opcodes import build_opcode
from jobproc.signals import JobSignals

pytestmark = pytest.mark.timeout(60)

GO = Directive(stop=False, index=0, priority=0)  # luxid: go on with opcode 0


class NoConfig:
    """The config reader of an opcode whose lock plan reads no configuration."""

    def get_object(self, kind: str, key: str) -> Any:
        raise AssertionError("not expected")

    def list_objects(self, kind: str) -> list[Any]:
        raise AssertionError("not expected")


async def take(wconfd_socket: Any, answers: list[Directive], **kw: Any) -> tuple[Any, ...]:
    """Acquire the locks of a delay on node/n1 as job 99; (outcome, reports, locks, taker)."""
    reports: list[Any] = []
    priority = 0

    async def report(event: Any) -> Directive:
        """What luxid would answer: the opcode's priority as last reported."""
        nonlocal priority
        reports.append(event)
        if isinstance(event, Priority):
            priority = event.priority
        if answers:
            return answers.pop(0)
        return Directive(stop=False, index=0, priority=priority)

    wc = AsyncWConfdClient(wconfd_socket, job_id=99)
    signals = JobSignals()
    taker = LockTaker(wc, signals, report, rng=lambda: 0.5, **kw)
    op = build_opcode({"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_nodes": ["n1"]})
    task = asyncio.ensure_future(taker.acquire(op, 0, 0, NoConfig()))
    return task, reports, wc, signals, taker


def test_timeouts_escalate_the_priority_and_the_grant_comes(wconfd):
    holder = WConfdClient(wconfd.socket, name="holder")
    assert holder.try_update_locks([["node/n1", "exclusive"]]) == []

    async def main() -> None:
        task, reports, wc, _, _ = await take(wconfd.socket, [], schedule=(0.05, 0.05))
        while sum(isinstance(r, Priority) for r in reports) < 2:
            await asyncio.sleep(0.02)
        # Between attempts the job holds nothing (timeouts release and start again).
        holder.free_locks()
        assert await asyncio.wait_for(task, 10) is Outcome.GRANTED
        assert sorted(await wc.list_locks()) == [["cluster/BGL", "shared"], ["node/n1", "exclusive"]]
        assert isinstance(reports[0], Waiting)
        priorities = [r.priority for r in reports if isinstance(r, Priority)]
        assert priorities[:2] == [-1, -2]
        assert any(isinstance(r, Check) for r in reports)
        await wc.free_locks()
        await wc.close()

    asyncio.run(main())


def test_a_nudge_withdraws_the_wait_and_luxid_can_stop_the_job(wconfd):
    holder = WConfdClient(wconfd.socket, name="holder")
    assert holder.try_update_locks([["node/n1", "exclusive"]]) == []

    async def main() -> None:
        stop = Directive(stop=True)
        task, reports, wc, signals, taker = await take(wconfd.socket, [GO, stop])
        while not holder.list_all_locks().pending:
            await asyncio.sleep(0.01)
        signals.nudge()
        assert await asyncio.wait_for(task, 10) == stop
        assert [type(r) for r in reports] == [Waiting, Check]
        assert holder.list_all_locks().pending == []  # the request was withdrawn
        await taker.free()
        assert await wc.list_locks() == []
        await wc.close()

    asyncio.run(main())


def test_cancel_interrupts_the_wait(wconfd):
    holder = WConfdClient(wconfd.socket, name="holder")
    assert holder.try_update_locks([["node/n1", "exclusive"]]) == []

    async def main() -> None:
        task, _, wc, signals, taker = await take(wconfd.socket, [])
        while not holder.list_all_locks().pending:
            await asyncio.sleep(0.01)
        signals.cancel()
        assert await asyncio.wait_for(task, 10) is Outcome.CANCELED
        await taker.free()
        assert holder.list_all_locks().pending == [] and await wc.list_locks() == []
        await wc.close()

    asyncio.run(main())
