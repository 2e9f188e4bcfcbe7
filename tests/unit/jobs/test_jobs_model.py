"""Job model: status and priority computation (Ganeti's jqueue semantics), submit."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client import errors
from luxid.jobs import (
    ALL_STATUSES,
    Dependency,
    Job,
    OpCode,
    job_priority,
    job_started,
    job_status,
    new_job,
    validate_ops,
)

Q, W, R, CI, CD, S, E = "queued", "waiting", "running", "canceling", "canceled", "success", "error"


def mk(statuses: list[str], prios: list[int] | None = None, **kw: Any) -> Job:
    """A job with one opcode per status (and priority)."""
    prios = prios or [0] * len(statuses)
    ops = tuple(
        OpCode(input={"OP_ID": "OP_TEST_DELAY", "duration": 0}, status=s, priority=p)  # type: ignore[arg-type]
        for s, p in zip(statuses, prios, strict=True)
    )
    return Job(id=kw.pop("id", 1), ops=ops, received_ts=0.0, **kw)


# ------------------------------------------------------------- vector 30 (10 ops)


@pytest.mark.parametrize(
    ("statuses", "expected"),
    [
        ([Q] * 10, Q),
        ([W] + [Q] * 9, W),
        ([S, S, W] + [Q] * 7, W),
        ([S, R] + [Q] * 8, R),
        ([S, S, CI] + [CI] * 7, CI),
        ([CI] * 10, CI),
        ([CD] * 10, CD),
        ([S] * 4 + [E] * 6, E),
        ([E] * 10, E),
        ([S] * 10, S),
    ],
)
def test_status_table_vector_30(statuses: list[str], expected: str) -> None:
    assert job_status(mk(statuses)) == expected


def test_no_ops_is_success_with_priority_0() -> None:
    job = mk([])
    assert job_status(job) == S
    assert job_priority(job) == 0


def test_between_opcodes_a_started_job_stays_running() -> None:
    """Our fix (docs/contracts.md#job-model): Ganeti says queued for [success, queued]; we say
    running."""
    assert job_status(mk([S, Q])) == R
    assert job_status(mk([S, S, Q, Q])) == R


def test_paused_job_between_opcodes_is_queued() -> None:
    assert job_status(mk([S, Q], paused=True)) == Q
    # still finishing its current opcode: running until that ends
    assert job_status(mk([S, R, Q], paused=True)) == R
    assert job_status(mk([S, W, Q], paused=True)) == W


def test_job_with_a_process_but_no_opcode_started_is_running() -> None:
    assert job_status(mk([Q, Q], process_id=42, process_start=1.0, start_ts=5.0)) == R
    assert not job_started(mk([Q, Q]))
    assert job_started(mk([Q], start_ts=1.0))


def test_error_cancel_states_decide_at_once_in_order() -> None:
    assert job_status(mk([E, CI])) == E
    assert job_status(mk([CD, E])) == CD
    assert job_status(mk([S, CI, Q])) == CI


# ------------------------------------------------------------------- vector 31

status_lists = st.lists(st.sampled_from(ALL_STATUSES), min_size=1, max_size=8)


@given(status_lists)
def test_success_op_around_a_started_job_changes_nothing(statuses: list[str]) -> None:
    """Vector 31 — for started jobs (for an unstarted one, our fix makes [s, q…] running)."""
    job = mk(statuses, start_ts=1.0)
    expected = job_status(job)
    assert job_status(mk([S, *statuses], start_ts=1.0)) == expected
    assert job_status(mk([*statuses, S], start_ts=1.0)) == expected


@given(status_lists, st.sampled_from([E, CI, CD]))
def test_error_or_cancel_op_before_decides(statuses: list[str], first: str) -> None:
    assert job_status(mk([first, *statuses])) == first


def ref_status(job: Job) -> str:
    """job_status's docstring, transcribed: the first error/canceling/canceled decides;
    all success (or none) is success; else the last waiting/running, or running for a
    started job between opcodes unless paused."""
    for op in job.ops:
        if op.status in (E, CI, CD):
            return op.status
    if all(op.status == S for op in job.ops):
        return S
    active = [op.status for op in job.ops if op.status in (W, R)]
    if active:
        return active[-1]
    started = job.start_ts is not None or job.process_id is not None
    if not job.paused and (started or any(op.status != Q for op in job.ops)):
        return R
    return Q


@given(
    st.lists(st.sampled_from(ALL_STATUSES), max_size=6),
    st.booleans(),
    st.sampled_from([None, 1.0]),
    st.sampled_from([None, 42]),
)
def test_status_agrees_with_its_definition(
    statuses: list[str], paused: bool, start_ts: float | None, process_id: int | None
) -> None:
    job = mk(statuses, paused=paused, start_ts=start_ts, process_id=process_id)
    assert job_status(job) == ref_status(job)


@given(status_lists, st.booleans())
def test_status_is_always_a_known_status(statuses: list[str], paused: bool) -> None:
    assert job_status(mk(statuses, paused=paused)) in ALL_STATUSES


# ------------------------------------------------------------------- vector 32


def test_priority_vector_32() -> None:
    assert job_priority(mk([Q, Q], [0, 0])) == 0
    assert job_priority(mk([Q, Q], [-1, 0])) == -1
    assert job_priority(mk([S, Q], [-1, 0])) == 0
    assert job_priority(mk([S, Q], [-1, -10])) == -10
    assert job_priority(mk([R, Q], [-20, 0])) == -20
    assert job_priority(mk([S, E], [-5, -7])) == 0


# ---------------------------------------------------------------------- submit


def test_new_job_appends_reason_and_resolves_relative_depends() -> None:
    ops = [
        {"OP_ID": "OP_TEST_DELAY", "duration": 1, "reason": [["cli", "why", 7]], "priority": -5},
        {"OP_ID": "OP_CLUSTER_RENAME", "name": "x", "depends": [[-2, ["success"]], [3, []]]},
    ]
    original = msgspec.json.decode(msgspec.json.encode(ops))
    job = new_job(10, ops, now=1234.5)
    assert ops == original, "caller's dicts must not be modified"
    assert job.id == 10 and job.received_ts == 1234.5
    assert [op.status for op in job.ops] == [Q, Q]
    assert [op.priority for op in job.ops] == [-5, 0]
    assert job.ops[0].input["reason"] == [
        ["cli", "why", 7],
        ["lw:opcode:op_test_delay", "job=10;index=0", 1234500000000],
    ]
    assert job.ops[1].input["reason"] == [
        ["lw:opcode:op_cluster_rename", "job=10;index=1", 1234500000000]
    ]
    assert job.ops[1].input["depends"] == [[8, ["success"]], [3, []]]
    assert job.depends == (Dependency(8, ("success",)), Dependency(3, ()))
    assert job_status(job) == Q and job.start_ts is None and job.end_ts is None


@pytest.mark.parametrize(
    ("ops", "param"),
    [
        ([{"OP_ID": "OP_X", "priority": 20}], "priority"),
        ([{"OP_ID": "OP_X", "priority": -21}], "priority"),
        ([{"OP_ID": "OP_X", "priority": True}], "priority"),
        ([{"OP_ID": "OP_X", "priority": "1"}], "priority"),
        ([{"OP_ID": "OP_X", "depends": [[0, []]]}], "depends"),
        ([{"OP_ID": "OP_X", "depends": [[1, ["running"]]]}], "depends"),
        ([{"OP_ID": "OP_X", "depends": [1]}], "depends"),
        ([{"OP_ID": "OP_X", "depends": "x"}], "depends"),
        ([{"OP_ID": "OP_X", "reason": [["a", "b"]]}], "reason"),
        ([{"OP_ID": "OP_X", "reason": [["a", "b", 1.5]]}], "reason"),
        ([{"OP_ID": "OP_X", "comment": 3}], "comment"),
    ],
)
def test_validate_ops_names_the_bad_param(ops: list[dict[str, Any]], param: str) -> None:
    with pytest.raises(errors.InvalidOpcode) as info:
        validate_ops(ops)
    assert param in info.value.message and "OP_X" in info.value.message


@pytest.mark.parametrize("ops", [[], None, [{"duration": 1}], [{"OP_ID": 5}], ["x"]])
def test_validate_ops_rejects_malformed_jobs(ops: Any) -> None:
    with pytest.raises((errors.InvalidOpcode, errors.InvalidParams)):
        validate_ops(ops)


def test_validate_ops_accepts_common_params() -> None:
    validate_ops(
        [
            {
                "OP_ID": "OP_TEST_DELAY",
                "duration": 0,
                "priority": -20,
                "depends": [[-1, ["success", "error"]], [5, []]],
                "reason": [["src", "text", 12]],
                "comment": "hello",
            }
        ]
    )


def test_job_round_trips_through_msgpack() -> None:
    job = new_job(3, [{"OP_ID": "OP_TEST_DELAY", "duration": 1.5, "depends": [[-1, []]]}], 9.0)
    data = msgspec.msgpack.encode(job)
    assert msgspec.msgpack.decode(data, type=Job) == job
