"""luxid's job methods (docs/contracts.md#job-methods) and every status path, through the real
daemons.

Each test runs wconfd and luxid on fresh directories; jobs run in real job processes
(the zygote's children) that take real locks in wconfd.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from client import LuxiClient, errors

sys.path.insert(0, str(Path(__file__).parent))
from ha_luxid_testlib import make_stack
from luxid_testlib import delay, process_alive, raises

pytestmark = pytest.mark.timeout(90)

ALL_FIELDS = [
    "id", "status", "priority", "summary", "ops", "opstatus", "opresult", "oplog",
    "oppriority", "opstart", "opexec", "opend", "received_ts", "start_ts", "end_ts",
    "archived", "pending_reason", "process_id", "depends",
]  # fmt: skip


@pytest.fixture(params=["local", "etcd"])
def stack(request, daemon_factory):
    s = make_stack(request, daemon_factory)
    yield s
    s.close()


def test_submit_runs_a_job_and_query_jobs_gives_every_field(stack):
    t0 = time.time()
    job_id = stack.submit(delay(0.05, log_messages=["hello", "world"], comment="c"))
    assert stack.wait_final(job_id) == "success"
    (row,) = stack.lc.query_jobs(ids=[job_id], fields=ALL_FIELDS)
    job = dict(zip(ALL_FIELDS, row, strict=True))
    assert job["id"] == job_id and job["status"] == "success" and job["priority"] == 0
    assert job["summary"] == ["TEST_DELAY(0.05)"]
    op = job["ops"][0]
    assert op["OP_ID"] == "OP_TEST_DELAY" and op["comment"] == "c"
    source, text, ts = op["reason"][-1]
    assert (source, text) == ("lw:opcode:op_test_delay", f"job={job_id};index=0")
    assert abs(ts / 1e9 - t0) < 5
    assert job["opstatus"] == ["success"] and job["opresult"] == [None]
    assert [[e[2], e[3]] for e in job["oplog"][0]] == [["message", "hello"], ["message", "world"]]
    assert [e[0] for e in job["oplog"][0]] == [1, 2]
    assert job["oppriority"] == [0]
    start, exec_, end = job["opstart"][0], job["opexec"][0], job["opend"][0]
    assert t0 <= job["received_ts"] <= job["start_ts"] <= start <= exec_ <= end <= job["end_ts"]
    assert end - exec_ >= 0.05
    assert job["archived"] is False and job["pending_reason"] is None
    assert isinstance(job["process_id"], int) and job["depends"] == []


def test_query_jobs_unknown_ids_all_jobs_and_bad_fields(stack):
    a = stack.submit(delay())
    b = stack.submit(delay())
    stack.wait_final(b)
    assert stack.lc.query_jobs(ids=[b, 999, a], fields=["id"]) == [[b], None, [a]]
    assert stack.lc.query_jobs(ids=None, fields=["id"]) == [[a], [b]]
    err = raises(errors.InvalidParams, stack.lc.query_jobs, ids=None, fields=["id", "nope"])
    assert "nope" in err.message


def test_invalid_opcodes_are_refused_naming_op_and_param(stack):
    err = raises(errors.InvalidOpcode, stack.lc.submit_job, ops=[{"OP_ID": "OP_NOPE"}])
    assert "OP_NOPE" in err.message
    err = raises(
        errors.InvalidOpcode, stack.lc.submit_job, ops=[delay(1), {"OP_ID": "OP_TEST_DELAY"}]
    )
    assert "OP_TEST_DELAY" in err.message and "duration" in err.message
    assert err.data["param"] == "duration"
    err = raises(errors.InvalidOpcode, stack.lc.submit_job, ops=[delay(-1)])
    assert "duration" in err.message
    err = raises(errors.InvalidOpcode, stack.lc.submit_job, ops=[delay(1, priority=99)])
    assert "priority" in err.message
    raises(errors.InvalidParams, stack.lc.submit_job, ops=[])
    assert stack.lc.query_jobs(ids=None, fields=["id"]) == []  # nothing stored, no id used
    assert stack.submit(delay()) == 1


def test_submit_many_jobs_answers_per_job(stack):
    answers = stack.lc.submit_many_jobs(jobs=[[delay()], [{"OP_ID": "OP_X"}], [delay(), delay()]])
    assert answers[0] == [True, 1]
    assert answers[1][0] is False and "OP_X" in answers[1][1]
    assert answers[2] == [True, 2]
    assert stack.wait_final(2) == "success"


def test_error_stops_the_job_and_later_opcodes_never_run(stack):
    job_id = stack.submit(delay(0, fail=True), delay(0, log_messages=["never"]))
    assert stack.wait_final(job_id) == "error"
    (row,) = stack.lc.query_jobs(ids=[job_id], fields=["opstatus", "opresult", "opexec", "oplog"])
    assert row[0] == ["error", "error"]
    assert row[1] == ["Opcode failure was requested", "Preceding opcode failed"]
    assert row[2][1] is None and row[3][1] == []


def test_wait_for_job_change_follows_logs_and_times_out(stack):
    stack.set_cluster(max_running_jobs=1)
    blocker = stack.submit(delay(30))
    stack.wait_op_running(blocker)
    job_id = stack.submit(delay(0, log_messages=["a", "b"]))
    fields = ["status"]
    first = stack.lc.wait_for_job_change(
        job_id=job_id, fields=fields, prev_values=None, prev_log_serial=None, timeout=5
    )
    assert first.values == ["queued"] and first.log == []
    t = time.monotonic()
    assert (
        stack.lc.wait_for_job_change(
            job_id=job_id, fields=fields, prev_values=["queued"], prev_log_serial=None, timeout=0.3
        )
        == "nochange"
    )
    assert 0.25 <= time.monotonic() - t < 2
    stack.lc.cancel_job(job_id=blocker)
    entries = []
    serial = None
    while len(entries) < 2:
        answer = stack.lc.wait_for_job_change(
            job_id=job_id, fields=fields, prev_values=["never"], prev_log_serial=serial, timeout=10
        )
        entries += [e for e in answer.log if e[3] in ("a", "b")]
        serial = max([serial or 0, *(e[0] for e in answer.log)])
    assert [e[3] for e in entries] == ["a", "b"]
    assert stack.wait_final(job_id) == "success"
    # A finalized job answers at once, whatever was seen before.
    answer = stack.lc.wait_for_job_change(
        job_id=job_id, fields=fields, prev_values=["success"], prev_log_serial=serial, timeout=30
    )
    assert answer.values == ["success"] and answer.log == []
    raises(
        errors.NotFound, stack.lc.wait_for_job_change,
        job_id=777, fields=fields, prev_values=None, prev_log_serial=None, timeout=1,
    )  # fmt: skip


def test_cancel_queued_job(stack):
    stack.set_cluster(max_running_jobs=1)
    blocker = stack.submit(delay(30))
    stack.wait_op_running(blocker)
    job_id = stack.submit(delay(0), delay(0))
    assert stack.field(job_id, "pending_reason") == "max running jobs reached"
    ok, message = stack.lc.cancel_job(job_id=job_id)
    assert ok and str(job_id) in message
    (row,) = stack.lc.query_jobs(ids=[job_id], fields=["status", "opstatus", "start_ts", "end_ts"])
    assert row[:2] == ["canceled", ["canceled", "canceled"]]
    assert row[2] is None and row[3] is not None
    ok, message = stack.lc.cancel_job(job_id=job_id)
    assert not ok and "finished" in message
    raises(errors.NotFound, stack.lc.cancel_job, job_id=12345)
    stack.lc.cancel_job(job_id=blocker)


def test_cancel_while_waiting_for_a_lock(stack):
    assert stack.wc.try_update_locks([["node/n1", "exclusive"]]) == []
    job_id = stack.submit(delay(0, on_nodes=["n1"]))
    stack.wait_status(job_id, "waiting")
    stack.until(stack.job_pending)  # its request waits in wconfd
    ok, _ = stack.lc.cancel_job(job_id=job_id)
    assert ok
    assert stack.status(job_id) == "canceled"  # at once
    stack.until(lambda: not stack.job_pending())  # the job withdrew its lock request
    stack.until(lambda: not stack.job_locks())  # and released the BGL
    assert stack.field(job_id, "opexec") == [None]


def test_cancel_while_running_an_interruptible_opcode(stack):
    job_id = stack.submit(delay(60, on_nodes=["n1"]), delay(0))
    stack.wait_op_running(job_id)
    assert sorted(stack.job_locks()) == ["cluster/BGL", "node/n1"]
    t = time.monotonic()
    ok, _ = stack.lc.cancel_job(job_id=job_id)
    assert ok
    assert stack.wait_final(job_id, timeout=10) == "canceled"
    assert time.monotonic() - t < 5
    assert stack.field(job_id, "opstatus") == ["canceled", "canceled"]
    stack.until(lambda: not stack.job_locks())


def test_cancel_running_job_finishes_its_uninterruptible_opcode_first(stack):
    stack.add_nodes("n1")
    stack.submit(
        {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i1", "memory": 64, "vcpus": 1,
         "disks": [{"size": 1}]}
    )  # fmt: skip
    stack.wait_final(1)
    job_id = stack.submit(
        {"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": "i1",
         "mode": "replace_on_primary", "duration": 1.0},
        delay(0),
    )  # fmt: skip
    stack.wait_op_running(job_id)
    ok, _ = stack.lc.cancel_job(job_id=job_id)
    assert ok
    assert stack.status(job_id) == "canceling"
    assert stack.wait_final(job_id) == "canceled"
    assert stack.field(job_id, "opstatus") == ["success", "canceled"]


def test_kill_marks_error_and_frees_locks(stack):
    job_id = stack.submit(delay(60, on_nodes=["n1"]))
    stack.wait_op_running(job_id)
    pid = stack.field(job_id, "process_id")
    ok, _ = stack.lc.cancel_job(job_id=job_id, kill=True)
    assert ok
    (row,) = stack.lc.query_jobs(ids=[job_id], fields=["status", "opresult"])
    assert row == ["error", ["killed"]]
    stack.until(lambda: not stack.job_locks(), timeout=5)
    stack.until(lambda: not process_alive(pid), timeout=5)


def test_priority_change_of_queued_and_running_jobs(stack):
    stack.set_cluster(max_running_jobs=1)
    running = stack.submit(delay(30), delay(0))
    stack.wait_op_running(running)
    queued = stack.submit(delay(0))
    ok, message = stack.lc.change_job_priority(job_id=queued, priority=-5)
    assert ok and "-5" in message
    assert stack.field(queued, "priority") == -5
    ok, _ = stack.lc.change_job_priority(job_id=running, priority=3)
    assert ok
    assert stack.field(running, "oppriority") == [0, 3]
    raises(errors.InvalidParams, stack.lc.change_job_priority, job_id=queued, priority=50)
    raises(errors.NotFound, stack.lc.change_job_priority, job_id=999, priority=1)
    stack.lc.cancel_job(job_id=running)
    stack.wait_final(queued)
    ok, message = stack.lc.change_job_priority(job_id=queued, priority=1)
    assert not ok and "finished" in message


def test_priority_and_dependency_ordering_with_one_slot(stack):
    stack.set_cluster(max_running_jobs=1)
    blocker = stack.submit(delay(30))
    stack.wait_op_running(blocker)
    low = stack.submit(delay(0, priority=5))
    normal = stack.submit(delay(0))
    urgent = stack.submit(delay(0, priority=-10))
    after_low = stack.submit(delay(0, priority=-20, depends=[[low, ["success"]]]))
    assert stack.field(after_low, "pending_reason") == f"waiting for job {low}"
    assert stack.field(after_low, "depends") == [[low, ["success"]]]
    stack.lc.cancel_job(job_id=blocker)
    ends = {}
    for job_id in (low, normal, urgent, after_low):
        stack.wait_final(job_id)
        ends[job_id] = stack.field(job_id, "start_ts")
    assert sorted(ends, key=ends.__getitem__) == [urgent, normal, low, after_low]


def test_relative_dependency_and_canceled_dependency(stack):
    stack.set_cluster(max_running_jobs=1)
    blocker = stack.submit(delay(30))
    stack.wait_op_running(blocker)
    first = stack.submit(delay(0))
    second = stack.submit(delay(0, depends=[[-1, []]]))
    assert stack.field(second, "depends") == [[first, []]]
    stack.lc.cancel_job(job_id=first)
    assert stack.wait_final(second) == "canceled"
    stack.lc.cancel_job(job_id=blocker)


def test_drain_flag_is_durable_and_refuses_submits(stack):
    assert stack.lc.set_drain_flag(flag=True) is True
    raises(errors.QueueDrained, stack.lc.submit_job, ops=[delay()])
    raises(errors.QueueDrained, stack.lc.submit_many_jobs, jobs=[[delay()]])
    assert stack.lc.query_queue_info().drained is True
    stack.restart_luxid()
    lc = LuxiClient(stack.luxid.socket)
    assert lc.query_queue_info().drained is True
    assert lc.set_drain_flag(flag=False) is True
    assert lc.submit_job(ops=[delay()]) == 1


def test_query_queue_info(stack):
    stack.set_cluster(max_running_jobs=2)
    a = stack.submit(delay(30))
    b = stack.submit(delay(30))
    c = stack.submit(delay(0))
    stack.wait_op_running(a)
    stack.wait_op_running(b)
    info = stack.lc.query_queue_info()
    assert info.max_running_jobs == 2 and info.running == 2 and info.filters == 0
    assert info.counts["running"] == 2 and info.counts["queued"] == 1
    assert not info.drained
    for job_id in (a, b):
        stack.lc.cancel_job(job_id=job_id)
    for job_id in (a, b, c):  # a running job ends canceled once its process has stopped
        stack.wait_final(job_id)
    info = stack.lc.query_queue_info()
    assert info.counts["canceled"] == 2 and info.counts["success"] == 1 and info.running == 0


def test_archive_and_auto_archive(stack):
    done = [stack.submit(delay()) for _ in range(3)]
    for job_id in done:
        stack.wait_final(job_id)
    stack.set_cluster(max_running_jobs=1)
    busy = stack.submit(delay(30))
    stack.wait_op_running(busy)
    assert stack.lc.archive_job(job_id=busy) is False  # not finalized
    assert stack.lc.archive_job(job_id=done[0]) is True
    assert stack.lc.archive_job(job_id=done[0]) is False  # already archived
    raises(errors.NotFound, stack.lc.archive_job, job_id=999)
    assert stack.lc.query_jobs(ids=None, fields=["id"]) == [[done[1]], [done[2]], [busy]]
    assert stack.lc.query_jobs(ids=[done[0]], fields=["id", "archived", "status"]) == [
        [done[0], True, "success"]
    ]
    assert tuple(stack.lc.auto_archive_jobs(age=3600)) == (0, 0)
    assert tuple(stack.lc.auto_archive_jobs(age=0, timeout=10)) == (2, 0)
    assert stack.lc.query_jobs(ids=None, fields=["id"]) == [[busy]]
    stack.lc.cancel_job(job_id=busy)
    # Archived jobs are still known: as dependencies and to wait_for_job_change.
    answer = stack.lc.wait_for_job_change(
        job_id=done[1], fields=["archived"], prev_values=None, prev_log_serial=None, timeout=1
    )
    assert answer.values == [True]
    after = stack.submit(delay(0, depends=[[done[1], ["success"]]]))
    assert stack.wait_final(after) == "success"


def test_priority_change_reaches_a_pending_lock_request(stack):
    assert stack.wc.try_update_locks([["node/n1", "exclusive"]]) == []
    job_id = stack.submit(delay(0, on_nodes=["n1"]))
    stack.wait_status(job_id, "waiting")
    pending = stack.until(lambda: stack.wc.list_all_locks().pending)
    assert [p.priority for p in pending] == [0]
    ok, _ = stack.lc.change_job_priority(job_id=job_id, priority=-7)
    assert ok
    assert stack.field(job_id, "oppriority") == [-7]
    # The job process withdrew its request and waits again at the new priority.
    stack.until(lambda: [p.priority for p in stack.wc.list_all_locks().pending] == [-7])
    stack.wc.free_locks()
    assert stack.wait_final(job_id) == "success"
