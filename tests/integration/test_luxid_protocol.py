"""The job-process protocol (job_report) and hostile input on luxid's socket.

Only a job's recorded process may report on it (SO_PEERCRED); every report is idempotent,
so a job process can re-send one across a luxid restart; and nothing a client sends can
crash luxid or leak a traceback.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

import pytest

from client.api.luxi import Finish, Hello, Log, LuxiApi, Running, Waiting
from luxid.jobs import job_status, new_job, start_job
from luxid.jobs.reports import apply_report

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay, raises

from client import errors

pytestmark = pytest.mark.timeout(120)

OPS = [delay(0), delay(0)]


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def started() -> Any:
    return start_job(new_job(7, OPS, 100.0), 101.0, pid=4242, pid_start=99.0)


def test_only_the_recorded_process_may_report(stack):
    stack.set_cluster(max_running_jobs=1)
    job_id = stack.submit(delay(30))
    stack.wait_op_running(job_id)
    err = raises(errors.PermissionDenied, stack.lc.job_report, job_id=job_id, event=Hello())
    assert str(job_id) in err.message
    raises(errors.PermissionDenied, stack.lc.job_report, job_id=job_id, event=Finish(0, "success"))
    queued = stack.submit(delay(0))
    raises(errors.PermissionDenied, stack.lc.job_report, job_id=queued, event=Running(0))
    raises(errors.NotFound, stack.lc.job_report, job_id=999, event=Hello())
    assert stack.status(job_id) == "running" and stack.status(queued) == "queued"
    stack.lc.cancel_job(job_id=job_id)


def test_every_report_is_idempotent():
    job = started()
    job, answer = apply_report(job, Hello(), 102.0)
    assert (answer.stop, answer.index, answer.ops) == (False, 0, [op.input for op in job.ops])
    for event in (Waiting(0), Running(0), Log(0, 0, "message", "x"), Finish(0, "success", 1)):
        once, first = apply_report(job, event, 103.0)
        twice, second = apply_report(once, event, 104.0)
        assert twice == once and second == first, event
        job = once
    assert [op.status for op in job.ops] == ["success", "queued"]
    assert [e.message for e in job.ops[0].log] == ["x"]
    assert job_status(job) == "running"  # between two opcodes a started job stays running


def test_the_running_gate_refuses_paused_and_canceled_jobs():
    from msgspec.structs import replace

    job = started()
    paused, answer = apply_report(replace(job, paused=True), Waiting(0), 102.0)
    assert answer.stop and paused.ops[0].status == "queued"
    from luxid.jobs import cancel_job

    canceling = cancel_job(job, 102.0).job
    done, answer = apply_report(canceling, Running(0), 103.0)
    assert answer.stop and job_status(done) == "canceled"
    with pytest.raises(errors.InvalidParams):
        apply_report(job, Running(1), 103.0)  # not the next opcode
    with pytest.raises(errors.InvalidParams):
        apply_report(job, Log(5, 0, "message", "x"), 103.0)


def _random_value(rnd: random.Random, depth: int = 0) -> Any:
    kinds = ["int", "str", "float", "bool", "null", "list", "dict", "bigint"]
    kind = rnd.choice(kinds if depth < 3 else kinds[:6])
    if kind == "int":
        return rnd.randint(-5, 5)
    if kind == "bigint":
        return rnd.choice([2**63, -(2**63), 10**30])
    if kind == "str":
        return rnd.choice(["", "x", "OP_TEST_DELAY", "watermark", "\u00e9", "a" * 300])
    if kind == "float":
        return rnd.choice([0.5, -1.0, 1e300, -1e300])
    if kind == "bool":
        return rnd.random() < 0.5
    if kind == "null":
        return None
    if kind == "list":
        return [_random_value(rnd, depth + 1) for _ in range(rnd.randint(0, 3))]
    return {rnd.choice(["OP_ID", "duration", "x", "event", "index"]): _random_value(rnd, depth + 1)
            for _ in range(rnd.randint(0, 3))}  # fmt: skip


def test_random_calls_never_crash_luxid(stack, raw_factory):
    job_id = stack.submit(delay(0))
    stack.wait_final(job_id)
    conn = raw_factory(stack.luxid.socket)
    rnd = random.Random(1234)
    methods = [
        "submit_job", "submit_many_jobs", "query_jobs", "wait_for_job_change", "cancel_job",
        "change_job_priority", "archive_job", "auto_archive_jobs", "query_queue_info",
        "replace_filter", "delete_filter", "query_filters", "job_report", "set_drain_flag",
    ]  # fmt: skip
    declared = LuxiApi.methods()
    seen: dict[str, int] = {}
    for i in range(1500):
        method = rnd.choice(methods)
        names = declared[method].param_names
        params: Any
        if rnd.random() < 0.1:
            params = [_random_value(rnd) for _ in range(rnd.randint(0, len(names) + 1))]
        else:
            params = {n: _random_value(rnd) for n in names if rnd.random() < 0.9}
            if method == "wait_for_job_change" and isinstance(params.get("timeout"), int | float):
                params["timeout"] = min(params["timeout"], 0.01)
            if method == "set_drain_flag":
                params["flag"] = False  # a drained queue would refuse the submits below
        frame = {"jsonrpc": "2.0", "method": method, "params": params, "id": i}
        answer = conn.call(json.dumps(frame).encode() + b"\n")
        assert answer["id"] == i
        kind = answer["error"]["data"]["type"] if "error" in answer else "result"
        seen[kind] = seen.get(kind, 0) + 1
        assert kind != "InternalError", (frame, answer)
        assert "Traceback" not in json.dumps(answer)
    assert seen.get("result", 0) > 100, seen  # the fuzz reaches past parameter checking
    assert stack.lc.ping() == "pong"
    assert stack.wait_final(stack.submit(delay(0))) in ("success", "canceled")
