"""Crashes (docs/contracts.md#scheduling-and-job-processes): kill -9 of job processes and of luxid
itself.

A dead job process fails its job ("job process died") and leaves no lock and no slot
behind; luxid killed at any moment loses no acknowledged job, reattaches to the job
processes that survived it, fails the jobs whose process died meanwhile, and never runs
an opcode twice.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from pathlib import Path

import pytest

from client import LuxiClient, errors

sys.path.insert(0, str(Path(__file__).parent))
from ha_luxid_testlib import make_stack
from luxid_testlib import Stack, delay, kill9, process_alive

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(params=["local", "etcd"])
def stack(request, daemon_factory):
    s = make_stack(request, daemon_factory)
    yield s
    s.close()


def test_kill9_of_a_job_process_fails_the_job_frees_locks_and_slot(stack):
    stack.set_cluster(max_running_jobs=1)
    victim = stack.submit(delay(60, on_nodes=["n1"]), delay(0))
    stack.wait_op_running(victim)
    waiting = stack.submit(delay(0, on_nodes=["n1"]))
    assert stack.field(waiting, "pending_reason") == "max running jobs reached"
    t = time.monotonic()
    kill9(stack.field(victim, "process_id"))
    assert stack.wait_final(victim, timeout=5) == "error"
    assert time.monotonic() - t < 2  # pidfd: noticed at once, not at a sweep
    (row,) = stack.lc.query_jobs(ids=[victim], fields=["opstatus", "opresult"])
    assert row == [["error", "error"], ["job process died", "job process died"]]
    # The slot and node/n1 are free: the next job takes both.
    assert stack.wait_final(waiting, timeout=10) == "success"
    stack.until(lambda: not stack.job_locks())


def test_kill9_of_a_job_process_waiting_for_a_lock(stack):
    assert stack.wc.try_update_locks([["node/n1", "exclusive"]]) == []
    job_id = stack.submit(delay(0, on_nodes=["n1"]))
    stack.wait_status(job_id, "waiting")
    stack.until(stack.job_pending)
    kill9(stack.field(job_id, "process_id"))
    assert stack.wait_final(job_id, timeout=5) == "error"
    stack.until(lambda: not stack.job_pending() and not stack.job_locks())


def test_kill9_of_luxid_keeps_running_jobs_and_runs_nothing_twice(stack):
    stack.add_nodes("base")
    stack.set_cluster(max_running_jobs=2)
    running = [stack.submit(delay(2.0, log_messages=[f"once-{i}"]), delay(0)) for i in range(2)]
    for job_id in running:
        stack.wait_op_running(job_id)
    pids = [stack.field(job_id, "process_id") for job_id in running]
    # Non-idempotent jobs: adding a node twice would fail the second time.
    queued = [stack.submit({"OP_ID": "OP_NODE_ADD", "node_name": f"n{i}"}) for i in range(4)]
    stack.restart_luxid(kill=True)
    assert all(process_alive(pid) for pid in pids)  # job processes survive luxid
    lc = LuxiClient(stack.luxid.socket, timeout=30)
    stack.lc = lc
    for job_id in [*running, *queued]:
        assert stack.wait_final(job_id) == "success"
    for job_id, pid in zip(running, pids, strict=True):
        (row,) = lc.query_jobs(ids=[job_id], fields=["process_id", "oplog", "opstatus"])
        assert row[0] == pid  # the same process finished the job
        assert [e[3] for e in row[1][0]] == [f"once-{running.index(job_id)}"]
        assert row[2] == ["success", "success"]
    assert stack.luxid.log().count("reattached to its process") == 2
    names = sorted(n["name"] for n in stack.wc.list_objects("node"))
    assert names == ["base", "n0", "n1", "n2", "n3"]


def test_job_process_that_died_while_luxid_was_down_is_failed_on_restart(stack):
    job_id = stack.submit(delay(60))
    stack.wait_op_running(job_id)
    pid = stack.field(job_id, "process_id")
    stack.luxid.kill()
    kill9(pid)
    stack.until(lambda: not process_alive(pid))
    stack.luxid.start()
    stack.lc = LuxiClient(stack.luxid.socket)
    assert stack.wait_final(job_id) == "error"
    assert stack.field(job_id, "opresult") == ["job process died"]
    assert "died while luxid was away" in stack.luxid.log()


def test_clean_luxid_restart_while_a_job_waits_for_luxid(stack):
    job_id = stack.submit(delay(0.5), delay(0.5))
    stack.wait_op_running(job_id)
    stack.restart_luxid()
    stack.lc = LuxiClient(stack.luxid.socket)
    assert stack.wait_final(job_id) == "success"


def test_kill9_of_luxid_loses_no_acknowledged_submit(stack):
    stack.set_cluster(max_running_jobs=1)
    stack.submit(delay(60))  # keep the others queued
    acked: list[int] = []
    stop = threading.Event()

    def submitter() -> None:
        lc = LuxiClient(stack.luxid.socket, timeout=10)
        while not stop.is_set():
            try:
                acked.append(lc.submit_job(ops=[delay(0)]))
            except errors.RpcError:
                return

    threads = [threading.Thread(target=submitter) for _ in range(4)]
    for t in threads:
        t.start()
    stack.until(lambda: len(acked) >= 50, timeout=30)
    stack.luxid.kill()
    stop.set()
    for t in threads:
        t.join(15)
    stack.luxid.start()
    lc = LuxiClient(stack.luxid.socket)
    rows = lc.query_jobs(ids=acked, fields=["id", "status"])
    assert all(row is not None for row in rows), "an acknowledged job was lost"
    assert len(set(acked)) == len(acked)
    # Ids go on above every id handed out before the crash.
    assert lc.submit_job(ops=[delay(0)]) > max(acked)


def test_kill9_of_wconfd_under_running_and_waiting_jobs(stack):
    running = stack.submit(delay(1.0, on_nodes=["n1"]), delay(0))
    stack.wait_op_running(running)
    waiting = stack.submit(delay(0, on_nodes=["n1"]))
    stack.wait_status(waiting, "waiting")
    stack.restart_wconfd(kill=True)
    # The running job keeps its lock across the restart; the waiting one re-issues its wait.
    assert stack.wait_final(running) == "success"
    assert stack.wait_final(waiting) == "success"
    stack.until(lambda: not stack.job_locks() and not stack.job_pending())


@pytest.mark.local_store("loads a jobs.sqlite written by an older luxid")
def test_a_store_written_by_an_older_luxid_loads_and_its_jobs_go_on(daemon_factory, tmp_path):
    """tests/fixtures/luxid_store_v1 (see its README): the job whose process died while
    luxid was away fails, its dependant fails with it, the queued ones run."""
    state = tmp_path / "state"
    state.mkdir()
    fixture = Path(__file__).parents[1] / "fixtures" / "luxid_store_v1" / "jobs.sqlite"
    shutil.copyfile(fixture, state / "jobs.sqlite")
    stack = Stack(daemon_factory)
    try:
        assert stack.wait_final(5) == "error"
        assert stack.field(5, "opresult")[0] == "job process died"
        assert stack.wait_final(6) == "error"
        assert stack.wait_final(7) == "success"
        assert stack.wait_final(8) == "success"
        assert stack.lc.query_jobs(ids=[1, 2, 3, 4], fields=["status", "archived"]) == [
            ["success", True], ["success", False], ["error", False], ["canceled", False],
        ]  # fmt: skip
        assert stack.submit(delay(0)) == 9  # ids go on above the stored counter
    finally:
        stack.close()
