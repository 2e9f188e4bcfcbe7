"""jobproc's lock taking (jobproc.locks.acquire) against a real wconfd, with a fast timeout
schedule: timeouts release everything and start again, exhausted schedules raise the
priority (reported to luxid), signals interrupt a wait and withdraw its request.

LockTaker runs on the job's thread: blocking calls, and its event loop for each wait; here
that thread is a helper thread, so the test can act (free the holder, send signals)
meanwhile."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future
from typing import Any

import pytest

from client import AsyncWConfdClient, WConfdClient
from client.api.luxi import Check, Directive, Priority, Waiting
from jobproc.locks.acquire import LockTaker, Outcome
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

    def node_rooms(self, nodes: Any = None) -> Any:
        raise AssertionError("not expected")


class Taking:
    """Job 99 acquiring the locks of a delay on node/n1, in a thread with its own loop."""

    def __init__(self, wconfd_socket: Any, answers: list[Directive], **kw: Any) -> None:
        self.answers = answers
        self.reports: list[Any] = []
        self.priority = 0
        self.loop = asyncio.new_event_loop()
        self.wc = WConfdClient(wconfd_socket, job_id=99)
        self.waiter = AsyncWConfdClient(wconfd_socket, job_id=99)
        self.signals = JobSignals()
        self.taker = LockTaker(
            self.wc, lambda: self.waiter, self.signals, self.report,
            self.loop.run_until_complete, rng=lambda: 0.5, **kw,
        )  # fmt: skip
        self.outcome: Future[Any] = Future()
        threading.Thread(target=self._acquire, daemon=True).start()

    def _acquire(self) -> None:
        op = build_opcode({"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_nodes": ["n1"]})
        try:
            self.outcome.set_result(self.taker.acquire(op, 0, 0, NoConfig()))
        except BaseException as exc:
            self.outcome.set_exception(exc)

    def report(self, event: Any) -> Directive:
        """What luxid would answer: the opcode's priority as last reported."""
        self.reports.append(event)
        if isinstance(event, Priority):
            self.priority = event.priority
        if self.answers:
            return self.answers.pop(0)
        return Directive(stop=False, index=0, priority=self.priority)

    def signal(self, handler: Any) -> None:
        """Deliver a signal's handler on the job's loop, as the loop would."""
        self.loop.call_soon_threadsafe(handler)

    def result(self) -> Any:
        """The outcome of acquire (the loop is then free for the test's own calls)."""
        return self.outcome.result(timeout=10)

    def locks(self) -> Any:
        return sorted(self.wc.list_locks())

    def close(self) -> None:
        self.taker.free()
        self.loop.run_until_complete(self.waiter.close())
        self.loop.close()
        self.wc.close()


def until(condition: Any) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_timeouts_escalate_the_priority_and_the_grant_comes(wconfd):
    holder = WConfdClient(wconfd.socket, name="holder")
    assert holder.try_update_locks([["node/n1", "exclusive"]]) == []
    job = Taking(wconfd.socket, [], schedule=(0.05, 0.05))
    until(lambda: sum(isinstance(r, Priority) for r in list(job.reports)) >= 2)
    # Between attempts the job holds nothing (timeouts release and start again).
    holder.free_locks()
    assert job.result() is Outcome.GRANTED
    assert job.locks() == [["cluster/BGL", "shared"], ["node/n1", "exclusive"]]
    assert isinstance(job.reports[0], Waiting)
    priorities = [r.priority for r in job.reports if isinstance(r, Priority)]
    assert priorities[:2] == [-1, -2]
    assert any(isinstance(r, Check) for r in job.reports)
    job.close()
    assert holder.list_all_locks().locks == []


def test_a_nudge_withdraws_the_wait_and_luxid_can_stop_the_job(wconfd):
    holder = WConfdClient(wconfd.socket, name="holder")
    assert holder.try_update_locks([["node/n1", "exclusive"]]) == []
    stop = Directive(stop=True)
    job = Taking(wconfd.socket, [GO, stop])
    until(lambda: holder.list_all_locks().pending)
    job.signal(job.signals.nudge)
    assert job.result() == stop
    assert [type(r) for r in job.reports] == [Waiting, Check]
    assert holder.list_all_locks().pending == []  # the request was withdrawn
    job.taker.free()
    assert job.locks() == []
    job.close()


def test_cancel_interrupts_the_wait(wconfd):
    holder = WConfdClient(wconfd.socket, name="holder")
    assert holder.try_update_locks([["node/n1", "exclusive"]]) == []
    job = Taking(wconfd.socket, [])
    until(lambda: holder.list_all_locks().pending)
    job.signal(job.signals.cancel)
    assert job.result() is Outcome.CANCELED
    job.taker.free()
    assert holder.list_all_locks().pending == [] and job.locks() == []
    job.close()
