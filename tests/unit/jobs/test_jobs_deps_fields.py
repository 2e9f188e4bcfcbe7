"""Dependencies (vector 35), reason rate-limit buckets (vectors 22-24), query_jobs fields."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from client import errors
from luxid.filters.ratelimit import bucket_limit, parse_reason_rate_limit
from luxid.jobs import (
    JOB_FIELDS,
    Job,
    add_log,
    check_dependencies,
    finish_opcode,
    job_fields,
    mark_opcode_running,
    new_job,
    op_summary,
    reason_buckets,
    register_summary_field,
    start_job,
    validate_fields,
)


def dep_job(job_id: int, *deps: list[Any]) -> Job:
    return new_job(job_id, [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "depends": list(deps)}], 1.0)


# ------------------------------------------------------------------- vector 35


@pytest.mark.parametrize(
    ("wanted", "dep_status", "action"),
    [
        ([], "running", "wait"),
        ([], "queued", "wait"),
        ([], "waiting", "wait"),
        ([], "canceling", "wait"),
        ([], "canceled", "cancel"),
        ([], "success", "continue"),
        ([], "error", "continue"),
        (["canceled"], "canceled", "continue"),
        (["error"], "error", "continue"),
        (["success", "error", "canceled"], "success", "continue"),
        (["success", "error", "canceled"], "error", "continue"),
        (["success", "error", "canceled"], "canceled", "continue"),
        (["success"], "queued", "wait"),
        (["success"], "error", "fail"),
        (["success"], "canceled", "cancel"),
        (["success"], "success", "continue"),
    ],
)
def test_dependency_vector_35(wanted: list[str], dep_status: str, action: str) -> None:
    job = dep_job(10, [5, wanted])
    result = check_dependencies(job, {5: dep_status}.get)
    assert result.action == action
    if action != "continue":
        assert result.job_id == 5
    if action == "wait":
        assert result.message == "waiting for job 5"


def test_dependency_on_missing_self_or_later_job_fails() -> None:
    assert check_dependencies(dep_job(10, [4, []]), {}.get).action == "fail"
    assert "not found" in check_dependencies(dep_job(10, [4, []]), {}.get).message
    assert check_dependencies(dep_job(10, [10, []]), {10: "queued"}.get).action == "fail"
    assert check_dependencies(dep_job(10, [11, []]), {11: "success"}.get).action == "fail"
    # relative ids that fall before job 1 can never exist
    assert check_dependencies(dep_job(2, [-5, []]), {}.get).action == "fail"


def test_relative_dependencies_and_first_blocker_decides() -> None:
    job = dep_job(10, [-1, ["success"]], [-3, []])
    assert [d.job_id for d in job.depends] == [9, 7]
    statuses = {9: "success", 7: "running"}
    assert check_dependencies(job, statuses.get).message == "waiting for job 7"
    statuses[7] = "error"
    assert check_dependencies(job, statuses.get).action == "continue"
    statuses[9] = "running"
    assert check_dependencies(job, statuses.get).job_id == 9


def test_archived_dependencies_count_with_their_stored_status() -> None:
    # status_of is backed by the store for archived jobs: they are known, not missing
    archived_status = {3: "success"}
    assert check_dependencies(dep_job(10, [3, ["success"]]), archived_status.get).action == (
        "continue"
    )


# ---------------------------------------------------------------- vectors 22-24


def test_rate_limit_reason_parsing() -> None:
    """The scheduler's buckets come from the filter core's parser (one parser, two users)."""
    assert parse_reason_rate_limit("rate-limit:20:my label") == ("20:my label", 20)
    assert parse_reason_rate_limit("rate-limit:21:my label") == ("21:my label", 21)
    assert parse_reason_rate_limit(" rate-limit:20:my label") is None
    assert parse_reason_rate_limit("rate-limit: 20:x") is None
    assert parse_reason_rate_limit("rate-limit:0:x") is None
    assert parse_reason_rate_limit("rate-limit:-1:x") is None
    assert parse_reason_rate_limit("rate-limit:x:y") is None
    assert parse_reason_rate_limit("rate-limit:3") == ("3", 3)
    assert parse_reason_rate_limit("rate-limit:7:a:b") == ("7:a:b", 7)
    assert parse_reason_rate_limit("ratelimit:3:x") is None
    assert bucket_limit("20:my label") == 20
    assert bucket_limit("3") == 3


def test_reason_buckets_of_a_job() -> None:
    job = new_job(
        4,
        [
            {"OP_ID": "OP_A", "reason": [["cli", "rate-limit:2:x", 1], ["cli", "other", 2]]},
            {"OP_ID": "OP_B", "reason": [["cli", "rate-limit:3:x", 1], ["c", "rate-limit:2:x", 3]]},
        ],
        1.0,
    )
    assert reason_buckets(job) == frozenset({"2:x", "3:x"})
    assert reason_buckets(new_job(5, [{"OP_ID": "OP_A"}], 1.0)) == frozenset()


# ------------------------------------------------------------------------ fields


def test_all_fields_of_a_running_job() -> None:
    job = new_job(
        12,
        [
            {"OP_ID": "OP_TEST_DELAY", "duration": 2, "priority": -5, "depends": [[-2, []]]},
            {"OP_ID": "OP_CLUSTER_RENAME", "name": "c1"},
        ],
        now=1000.0,
    )
    job = start_job(job, 1001.0, pid=99, pid_start=1000.5)
    job = mark_opcode_running(job, 0, 1002.0)
    job = add_log(job, 0, 1002.5, "message", "sleeping")
    job = finish_opcode(job, 0, 1003.0, True, {"slept": 2})
    row = job_fields(job, list(JOB_FIELDS))
    values = dict(zip(JOB_FIELDS, row, strict=True))
    assert values["id"] == 12
    assert values["status"] == "running"
    assert values["priority"] == 0
    assert values["summary"] == ["TEST_DELAY(2.0)", "CLUSTER_RENAME(c1)"]
    assert values["ops"][0]["OP_ID"] == "OP_TEST_DELAY" and values["ops"][0]["depends"] == [
        [10, []]
    ]
    assert values["opstatus"] == ["success", "queued"]
    assert values["opresult"] == [{"slept": 2}, None]
    assert values["oplog"] == [[[1, 1002.5, "message", "sleeping"]], []]
    assert values["oppriority"] == [-5, 0]
    assert values["opstart"] == [1002.0, None]
    assert values["opexec"] == [1002.0, None]
    assert values["opend"] == [1003.0, None]
    assert values["received_ts"] == 1000.0
    assert values["start_ts"] == 1001.0
    assert values["end_ts"] is None
    assert values["archived"] is False
    assert values["pending_reason"] is None
    assert values["process_id"] == 99
    assert values["depends"] == [[10, []]]
    # plain JSON values: they survive a JSON round trip unchanged
    assert msgspec.json.decode(msgspec.json.encode(row)) == row


def test_fields_in_requested_order_and_repeated() -> None:
    job = new_job(3, [{"OP_ID": "OP_NODE_ADD", "node_name": "n1"}], 5.0)
    assert job_fields(job, ["status", "id", "id", "summary"]) == [
        "queued",
        3,
        3,
        ["NODE_ADD(n1)"],
    ]
    assert job_fields(job, []) == []


def test_unknown_field_raises_invalid_params_naming_it() -> None:
    job = new_job(3, [{"OP_ID": "OP_A"}], 5.0)
    with pytest.raises(errors.InvalidParams) as info:
        job_fields(job, ["id", "bogus_field"])
    assert "bogus_field" in info.value.message
    with pytest.raises(errors.InvalidParams):
        validate_fields(["id", 3])
    with pytest.raises(errors.InvalidParams):
        validate_fields("id")
    assert validate_fields(("id", "status")) == ["id", "status"]


def test_summaries_like_ganeti() -> None:
    assert op_summary({"OP_ID": "OP_TEST_DELAY", "duration": 0}) == "TEST_DELAY(0.0)"
    assert op_summary({"OP_ID": "OP_TEST_DELAY", "duration": 1.5}) == "TEST_DELAY(1.5)"
    assert op_summary({"OP_ID": "OP_CLUSTER_VERIFY"}) == "CLUSTER_VERIFY"
    assert op_summary({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "i1"}) == (
        "INSTANCE_CREATE(i1)"
    )
    assert op_summary({"OP_ID": "OP_INSTANCE_CREATE"}) == "INSTANCE_CREATE"
    register_summary_field("OP_X_PLUGIN", "targets")
    assert op_summary({"OP_ID": "OP_X_PLUGIN", "targets": ["a", "b"]}) == "X_PLUGIN(a,b)"
