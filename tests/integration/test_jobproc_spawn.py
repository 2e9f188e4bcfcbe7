"""How job processes start (docs/contracts.md#scheduling-and-job-processes): the warm zygote, its
exec fallback, plain exec, and cancels that race with a process's start."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay, kill9, process_alive

pytestmark = pytest.mark.timeout(120)


def zygotes(luxid_pid: int) -> list[psutil.Process]:
    return [
        p for p in psutil.Process(luxid_pid).children()
        if "--zygote" in p.cmdline() and p.status() != psutil.STATUS_ZOMBIE
    ]  # fmt: skip


def test_plain_exec_runs_and_cancels_jobs(daemon_factory):
    stack = Stack(daemon_factory, "--job-spawn", "exec")
    assert stack.wait_final(stack.submit(delay(0, log_messages=["x"]))) == "success"
    job_id = stack.submit(delay(60))
    stack.wait_op_running(job_id)
    pid = stack.field(job_id, "process_id")
    assert "jobproc" in " ".join(psutil.Process(pid).cmdline())
    stack.lc.cancel_job(job_id=job_id)
    assert stack.wait_final(job_id) == "canceled"
    assert zygotes(stack.luxid.pid) == []
    stack.close()


def test_jobs_run_when_the_zygote_dies(daemon_factory):
    stack = Stack(daemon_factory)
    assert stack.wait_final(stack.submit(delay(0))) == "success"
    (zygote,) = stack.until(lambda: zygotes(stack.luxid.pid))
    kill9(zygote.pid)
    stack.until(lambda: not process_alive(zygote.pid))
    for _ in range(3):
        assert stack.wait_final(stack.submit(delay(0))) == "success"
    assert [z.pid for z in stack.until(lambda: zygotes(stack.luxid.pid))] != [zygote.pid]
    stack.close()


def test_job_processes_leave_the_zygote_and_luxid_session(daemon_factory):
    stack = Stack(daemon_factory)
    job_id = stack.submit(delay(60))
    stack.wait_op_running(job_id)
    pid = stack.field(job_id, "process_id")
    assert os.getsid(pid) == pid != os.getsid(stack.luxid.pid)
    stack.lc.cancel_job(job_id=job_id)
    stack.wait_final(job_id)
    stack.close()


def test_cancel_racing_with_the_start_leaves_nothing_behind(daemon_factory):
    stack = Stack(daemon_factory)
    ids = []
    for _ in range(20):
        job_id = stack.submit(delay(30, on_nodes=["n1"]))
        stack.lc.cancel_job(job_id=job_id)
        ids.append(job_id)
    for job_id in ids:
        assert stack.wait_final(job_id) in ("canceled", "error")
    assert [stack.status(j) for j in ids].count("canceled") == len(ids)
    stack.until(lambda: not stack.job_locks() and not stack.job_pending())
    pids = [pid for pid in (stack.field(j, "process_id") for j in ids) if pid is not None]
    stack.until(lambda: not any(process_alive(pid) for pid in pids))
    assert stack.lc.query_queue_info().running == 0
    stack.close()
