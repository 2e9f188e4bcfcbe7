"""Job filters (docs/contracts.md#filters, Ganeti's design-optables) through luxid and wconfd: the filter methods,
the design's examples as written, pausing running jobs, rule changes while jobs wait (from luxid or
straight in wconfd), and rules surviving restarts of both daemons."""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

import pytest

from client import LuxiClient, errors

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay, process_alive, raises

pytestmark = pytest.mark.timeout(120)

AFTER_WATERMARK = [["jobid", [">", "id", "watermark"]]]
FIELDS = ["uuid", "watermark", "priority", "predicates", "action", "reason_trail"]


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def add(stack: Stack, action: Any, predicates: Any = (), priority: int = 0, **kw: Any) -> str:
    return str(
        stack.lc.replace_filter(
            uuid=kw.get("uuid"), priority=priority, predicates=list(predicates),
            action=action, reason=kw.get("reason", [["test", "why", 1]]),
        )
    )  # fmt: skip


def create(name: str) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": name, "memory": 64, "vcpus": 1,
            "disks": [{"size": 1}]}  # fmt: skip


# -- the methods ---------------------------------------------------------------------------


def test_replace_query_delete_and_watermark(stack):
    first = stack.submit(delay())
    uuid = add(stack, "CONTINUE", AFTER_WATERMARK, priority=3)
    (row,) = stack.lc.query_filters(uuids=[uuid])
    rule = dict(zip(FIELDS, row, strict=True))
    assert rule["uuid"] == uuid and rule["priority"] == 3 and rule["action"] == "CONTINUE"
    assert rule["predicates"] == AFTER_WATERMARK
    assert first <= rule["watermark"] < stack.submit(delay())
    assert rule["reason_trail"][0] == ["test", "why", 1]
    assert rule["reason_trail"][-1][:2] == ["luxid", ""]
    # Replace: same uuid, new content, watermark recomputed.
    stack.submit(delay())
    assert add(stack, ["RATE_LIMIT", 4], uuid=uuid) == uuid
    row = stack.lc.query_filters(uuids=[uuid], fields=["action", "watermark", "predicates"])[0]
    assert row[0] == ["RATE_LIMIT", 4] and row[1] == 3 and row[2] == []
    # A given uuid that does not exist yet is created (upsert).
    given = "0123abcd-0000-4000-8000-00000000beef"
    assert add(stack, "ACCEPT", uuid=given) == given
    assert [r[0] for r in stack.lc.query_filters()] == sorted([uuid, given])
    assert stack.lc.query_filters(uuids=None, fields=["priority"]) == [[0], [0]]
    assert stack.lc.query_queue_info().filters == 2
    # They live in the wconfd configuration.
    assert set(stack.wc.get_config()["filters"]) == {uuid, given}
    assert stack.lc.delete_filter(uuid=uuid) is None
    raises(errors.NotFound, stack.lc.delete_filter, uuid=uuid)
    raises(errors.NotFound, stack.lc.query_filters, uuids=[uuid])
    raises(errors.InvalidParams, stack.lc.query_filters, uuids=None, fields=["bogus"])


BAD_RULES = [
    ({"predicates": [["nope", None]]}, "predicates"),
    ({"predicates": [["jobid"]]}, "predicates"),
    ({"predicates": [["jobid", ["~~", "id", 1]]]}, "predicates"),
    ({"predicates": [["jobid", ["==", "name", 1]]]}, "predicates"),
    ({"predicates": [["reason", ["==", "OP_ID", "x"]]]}, "predicates"),
    ({"predicates": [["opcode", ["=~", "OP_ID", "(unclosed"]]]}, "predicates"),
    ({"priority": -1}, "priority"),
    ({"action": "accept"}, "action"),
    ({"action": ["RATE_LIMIT", 0]}, "action"),
    ({"uuid": "not-a-uuid"}, "uuid"),
]


@pytest.mark.parametrize(("kw", "part"), BAD_RULES)
def test_bad_rules_are_refused_with_filter_error(stack, kw, part):
    args = {"uuid": None, "priority": 0, "predicates": [], "action": "ACCEPT", "reason": []}
    args.update(kw)
    err = raises(errors.FilterError, stack.lc.replace_filter, **args)
    assert part in err.message
    assert stack.lc.query_filters() == []


@pytest.mark.parametrize(("kw", "part"), BAD_RULES)
def test_rules_written_into_wconfd_get_the_same_checks(stack, kw, part):
    """A rule is checked the same way whichever path writes it
    (docs/contracts.md#reliability-and-security)."""
    rule = {"priority": 0, "predicates": [], "action": "ACCEPT", "reason_trail": []}
    err = raises(errors.FilterError, stack.wc.add_object, kind="filter", object={**rule, **kw})
    assert part in err.message
    assert stack.wc.list_objects("filter") == []
    good = stack.wc.add_object("filter", rule)
    if "uuid" not in kw:  # an update names its object by uuid: that one cannot be bad
        err = raises(
            errors.FilterError, stack.wc.update_object, kind="filter", object={**good, **kw}
        )
        assert part in err.message
    stack.until(lambda: stack.lc.query_filters(fields=["uuid"]) == [[good["uuid"]]])
    stack.wc.remove_object("filter", good["uuid"])


# -- the design's examples ---------------------------------------------------------------------


def test_drain_rejects_new_jobs_at_submit_and_old_ones_run(stack):
    stack.set_cluster(max_running_jobs=1)
    busy = stack.submit(delay(0.3))
    old = stack.submit(delay(0))
    uuid = add(stack, "REJECT", AFTER_WATERMARK)
    new = stack.submit(delay(0))
    # Rejected synchronously: canceled before submit_job returned.
    (row,) = stack.lc.query_jobs(ids=[new], fields=["status", "opresult"])
    assert row == ["canceled", [f"rejected by filter {uuid}"]]
    assert stack.wait_final(busy) == stack.wait_final(old) == "success"


def test_soft_drain_pauses_new_jobs_until_the_rule_goes(stack):
    uuid = add(stack, "PAUSE", AFTER_WATERMARK)
    job_id = stack.submit(delay(0))
    stack.until(lambda: stack.field(job_id, "pending_reason") == f"paused by filter {uuid}")
    assert stack.status(job_id) == "queued"
    stack.lc.delete_filter(uuid=uuid)
    assert stack.wait_final(job_id) == "success"


def test_maintenance_exception_accepts_by_reason_and_pauses_the_rest(stack):
    add(stack, "ACCEPT", [["reason", ["=~", "reason", "maintenance pink bunny"]]], priority=0)
    pause = add(stack, "PAUSE", AFTER_WATERMARK, priority=1)
    plain = stack.submit(delay(0))
    special = stack.submit(delay(0, reason=[["user", "maintenance pink bunny #42", 5]]))
    assert stack.wait_final(special) == "success"
    assert stack.status(plain) == "queued"
    assert stack.field(plain, "pending_reason") == f"paused by filter {pause}"
    for row in stack.lc.query_filters(fields=["uuid"]):
        stack.lc.delete_filter(uuid=row[0])
    assert stack.wait_final(plain) == "success"


def test_cancel_instance_creations(stack):
    stack.add_nodes("n1")
    stack.set_cluster(max_running_jobs=1)
    busy = stack.submit(delay(30))
    stack.wait_op_running(busy)
    queued = stack.submit(create("i1"))
    other = stack.submit(delay(0))
    uuid = add(stack, "REJECT", [["opcode", ["=", "OP_ID", "OP_INSTANCE_CREATE"]]], priority=1)
    assert stack.wait_final(queued) == "canceled"  # already queued: canceled by the pass
    assert stack.field(queued, "opresult") == [f"rejected by filter {uuid}"]
    new = stack.submit(create("i2"))
    assert stack.status(new) == "canceled"
    stack.lc.cancel_job(job_id=busy)
    assert stack.wait_final(other) == "success"


def test_rate_limit_rule_throttles_matching_jobs(stack):
    uuid = add(stack, ["RATE_LIMIT", 2], [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]],
               priority=99)  # fmt: skip
    jobs = [stack.submit(delay(30)) for _ in range(3)]
    stack.wait_op_running(jobs[0])
    stack.wait_op_running(jobs[1])
    assert stack.status(jobs[2]) == "queued"
    assert stack.field(jobs[2], "pending_reason") == f"rate-limited by filter {uuid}"
    other = stack.submit({"OP_ID": "OP_CLUSTER_VERIFY"})  # not matched: not limited
    assert stack.wait_final(other) == "success"
    stack.lc.cancel_job(job_id=jobs[0])
    stack.wait_op_running(jobs[2])
    for job_id in jobs[1:]:
        stack.lc.cancel_job(job_id=job_id)


def test_ad_hoc_reason_rate_limit(stack):
    reason = [["user", "rate-limit:2:operation pink bunny", 1]]
    jobs = [stack.submit(delay(30, reason=reason)) for _ in range(3)]
    stack.wait_op_running(jobs[0])
    stack.wait_op_running(jobs[1])
    assert stack.field(jobs[2], "pending_reason") == "rate-limit bucket 2:operation pink bunny full"
    free = stack.submit(delay(0, reason=[["user", "rate-limit:3:operation pink bunny", 1]]))
    assert stack.wait_final(free) == "success"  # another bucket
    stack.lc.cancel_job(job_id=jobs[1])
    stack.wait_op_running(jobs[2])
    for job_id in (jobs[0], jobs[2]):
        stack.lc.cancel_job(job_id=job_id)


# -- pausing started jobs ----------------------------------------------------------------


def test_pause_running_job_releases_locks_and_resumes_at_the_next_opcode(stack):
    job_id = stack.submit(delay(1.0, on_nodes=["n1"]), delay(0, on_nodes=["n1"]))
    stack.wait_op_running(job_id)
    pid = stack.field(job_id, "process_id")
    first_exec = stack.field(job_id, "opexec")[0]
    uuid = add(stack, "PAUSE", [["jobid", ["==", "id", job_id]]])
    # It finishes its opcode, releases its locks and is queued again.
    stack.wait_status(job_id, "queued")
    (row,) = stack.lc.query_jobs(ids=[job_id], fields=["opstatus", "pending_reason"])
    assert row == [["success", "queued"], f"paused by filter {uuid}"]
    stack.until(lambda: not stack.job_locks())
    stack.until(lambda: not process_alive(pid))
    stack.lc.delete_filter(uuid=uuid)
    assert stack.wait_final(job_id) == "success"
    (row,) = stack.lc.query_jobs(ids=[job_id], fields=["opexec", "process_id"])
    assert row[0][0] == first_exec  # the first opcode did not run again
    assert row[1] != pid  # a new process resumed the job


def test_pause_job_waiting_for_a_lock_gives_its_locks_back(stack):
    assert stack.wc.try_update_locks([["node/n1", "exclusive"]]) == []
    job_id = stack.submit(delay(0, on_nodes=["n1"]))
    stack.wait_status(job_id, "waiting")
    uuid = add(stack, "PAUSE", [["jobid", ["==", "id", job_id]]])
    stack.wait_status(job_id, "queued")
    assert stack.field(job_id, "pending_reason") == f"paused by filter {uuid}"
    stack.until(lambda: not stack.job_pending() and not stack.job_locks())
    stack.wc.free_locks()
    stack.lc.delete_filter(uuid=uuid)
    assert stack.wait_final(job_id) == "success"


# -- rule changes while jobs wait ------------------------------------------------------------


def _start_latency(stack: Stack, job_id: int, remove: Any) -> float:
    """Seconds from `remove()` returning to luxid starting the job (its start_ts)."""
    remove()
    removed = time.time()
    stack.wait_op_running(job_id)
    return float(stack.field(job_id, "start_ts")) - removed


def test_rule_change_through_luxid_takes_effect_within_100ms(stack):
    assert stack.wait_final(stack.submit(delay(0))) == "success"  # the zygote is warm
    uuid = add(stack, "PAUSE", AFTER_WATERMARK)
    job_id = stack.submit(delay(5))
    stack.until(lambda: stack.field(job_id, "pending_reason") is not None)
    latency = _start_latency(stack, job_id, lambda: stack.lc.delete_filter(uuid=uuid))
    assert latency < 0.1
    stack.lc.cancel_job(job_id=job_id)


def test_rule_change_made_directly_in_wconfd_takes_effect_within_100ms(stack):
    assert stack.wait_final(stack.submit(delay(0))) == "success"  # the zygote is warm
    uuid = add(stack, "PAUSE", AFTER_WATERMARK)
    job_id = stack.submit(delay(5))
    stack.until(lambda: stack.field(job_id, "pending_reason") is not None)
    latency = _start_latency(stack, job_id, lambda: stack.wc.remove_object("filter", uuid))
    assert latency < 0.1
    # And a rule written straight into wconfd pauses new jobs too.
    rule = {"priority": 0, "predicates": [], "action": "PAUSE", "reason_trail": []}
    added = stack.wc.add_object("filter", rule)
    stack.until(lambda: stack.lc.query_queue_info().filters == 1, timeout=0.1, step=0.005)
    later = stack.submit(delay(0))
    stack.until(lambda: stack.field(later, "pending_reason") == f"paused by filter {added['uuid']}")
    stack.lc.cancel_job(job_id=job_id)


def test_rule_added_while_jobs_wait_reaches_queued_jobs(stack):
    stack.set_cluster(max_running_jobs=1)
    busy = stack.submit(delay(30))
    stack.wait_op_running(busy)
    waiting = [stack.submit(delay(0)) for _ in range(3)]
    uuid = add(stack, "PAUSE", [["jobid", ["==", "id", waiting[1]]]])
    stack.until(lambda: stack.field(waiting[1], "pending_reason") == f"paused by filter {uuid}")
    assert stack.field(waiting[0], "pending_reason") == "max running jobs reached"
    stack.lc.cancel_job(job_id=busy)
    assert stack.wait_final(waiting[0]) == stack.wait_final(waiting[2]) == "success"
    assert stack.status(waiting[1]) == "queued"


# -- persistence -------------------------------------------------------------------------


def test_filters_survive_restarts_of_both_daemons(stack):
    uuid = add(stack, "PAUSE", AFTER_WATERMARK)
    job_id = stack.submit(delay(0))
    stack.until(lambda: stack.field(job_id, "pending_reason") == f"paused by filter {uuid}")
    before = stack.lc.query_filters()
    stack.restart_wconfd(kill=True)
    stack.restart_luxid(kill=True)
    lc = stack.lc = LuxiClient(stack.luxid.socket, timeout=30)
    assert lc.query_filters() == before
    stack.until(lambda: stack.field(job_id, "pending_reason") == f"paused by filter {uuid}")
    assert stack.status(job_id) == "queued"
    lc.delete_filter(uuid=uuid)
    assert stack.wait_final(job_id) == "success"


def test_pausing_survives_a_luxid_crash_in_the_middle(stack):
    job_id = stack.submit(delay(1.0), delay(0))
    stack.wait_op_running(job_id)
    uuid = add(stack, "PAUSE", [["jobid", ["==", "id", job_id]]])
    stack.restart_luxid(kill=True)  # while the paused job still runs its first opcode
    lc = stack.lc = LuxiClient(stack.luxid.socket, timeout=30)
    stack.wait_status(job_id, "queued")
    stack.until(lambda: stack.field(job_id, "pending_reason") == f"paused by filter {uuid}")
    assert stack.field(job_id, "opstatus") == ["success", "queued"]
    lc.delete_filter(uuid=uuid)
    assert stack.wait_final(job_id) == "success"
    assert stack.field(job_id, "opstatus") == ["success", "success"]
