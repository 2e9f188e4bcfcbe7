"""What `query_filters` shows is what the very next `submit_job` is judged by
(docs/contracts.md#reliability-and-security).

200 rounds per path: add a REJECT rule, wait until query_filters lists it, submit (must be
rejected by that rule); remove it, wait until query_filters no longer lists it, submit
(must not be rejected).  Once with the rules written straight into wconfd
(`add_object`/`remove_object(kind="filter")`, which luxid learns of through
wait_config_change) and once through luxid's own `replace_filter`/`delete_filter`.
A PAUSE rule behind the REJECT one keeps every admitted job queued, so no job process runs.
"""

from __future__ import annotations

import sys
import time
import uuid as uuidlib
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay

pytestmark = pytest.mark.timeout(180)

ROUNDS = 200


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def listed(stack: Stack) -> set[str]:
    return {row[0] for row in stack.lc.query_filters(uuids=None, fields=["uuid"])}


def wait_listed(stack: Stack, uuid: str, present: bool) -> None:
    deadline = time.monotonic() + 10
    while (uuid in listed(stack)) != present:
        assert time.monotonic() < deadline, f"rule {uuid} never {'listed' if present else 'gone'}"
        time.sleep(0.001)


def verdict_of_next_submit(stack: Stack) -> Any:
    """The status and result of a job submitted now, read right after the submit."""
    job_id = stack.submit(delay(0))
    (row,) = stack.lc.query_jobs(ids=[job_id], fields=["status", "opresult"])
    return row[0], row[1][0]


def run_rounds(stack: Stack, add: Any, remove: Any) -> list[str]:
    pause = stack.lc.replace_filter(uuid=None, priority=9, predicates=[], action="PAUSE", reason=[])
    wrong = []
    for i in range(ROUNDS):
        uuid = str(uuidlib.uuid4())
        add(uuid)
        wait_listed(stack, uuid, True)
        status, result = verdict_of_next_submit(stack)
        if (status, result) != ("canceled", f"rejected by filter {uuid}"):
            wrong.append(f"round {i}: admitted past listed rule {uuid}: {status} {result}")
        remove(uuid)
        wait_listed(stack, uuid, False)
        status, result = verdict_of_next_submit(stack)
        if status != "queued":
            wrong.append(f"round {i}: judged by unlisted rule {uuid}: {status} {result}")
    stack.lc.delete_filter(uuid=pause)
    return wrong


def test_rules_written_through_wconfd_judge_exactly_when_listed(stack):
    def add(uuid: str) -> None:
        stack.wc.add_object(
            kind="filter",
            object={"uuid": uuid, "priority": 0, "watermark": 0, "predicates": [],
                    "action": "REJECT", "reason_trail": []},
        )  # fmt: skip

    def remove(uuid: str) -> None:
        stack.wc.remove_object(kind="filter", key=uuid)

    assert run_rounds(stack, add, remove) == []


def test_rules_written_through_luxid_judge_exactly_when_listed(stack):
    def add(uuid: str) -> None:
        stack.lc.replace_filter(uuid=uuid, priority=0, predicates=[], action="REJECT", reason=[])

    def remove(uuid: str) -> None:
        stack.lc.delete_filter(uuid=uuid)

    assert run_rounds(stack, add, remove) == []
