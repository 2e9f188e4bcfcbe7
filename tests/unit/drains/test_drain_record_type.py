"""The drain record is declared once (client.drains): wconfd's `drain` kind is that type,
so what luxid writes and what wconfd stores and checks cannot drift apart."""

from __future__ import annotations

import msgspec
import pytest

from client.drains import Blocked, DrainJob, DrainRecord
from client.errors import InvalidParams
from wconfd.config import ConfigState
from wconfd.config.objects import KIND_TYPES, convert_object


def test_wconfd_stores_the_client_type() -> None:
    assert KIND_TYPES["drain"] is DrainRecord


def test_a_record_luxid_writes_comes_back_equal_from_wconfd() -> None:
    record = DrainRecord(
        target="node/n1", started_at=1.0, updated_at=2.0, max_parallel=3,
        events=((1, 1.5, "drain strategy set (no deadline, max_parallel 3)"),),
        active=(DrainJob(id=7, kind="migrate", instance="a", node="n2", status="running"),),
        done=(DrainJob(id=6, kind="drained", status="success"),),
        blocked={"b": Blocked(reason="no node has room for b", key="k")},
    )  # fmt: skip
    state = ConfigState.fresh(1.0)
    plan = state.add_object("drain", msgspec.to_builtins(record), 3.0)
    assert plan.record is not None
    state.apply(plan.record)
    stored = state.get_object("drain", "node/n1")
    assert isinstance(stored, DrainRecord)
    expected = msgspec.structs.replace(record, uuid="node/n1")
    assert msgspec.structs.replace(stored, serial_no=0, ctime=0.0, mtime=0.0) == expected


@pytest.mark.parametrize(
    "bad",
    [
        {"active": [{"id": "seven", "kind": "migrate"}]},
        {"done": [{"id": 1, "kind": "teleport"}]},
        {"blocked": {"a": {"why": "full"}}},
        {"events": [[1, 2.0]]},
        {"surprise": True},
    ],
)
def test_malformed_resume_state_is_refused_when_written(bad: dict[str, object]) -> None:
    with pytest.raises(InvalidParams):
        convert_object("drain", {"target": "queue", **bad})
