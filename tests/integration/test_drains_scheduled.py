"""Scheduled drains (docs/contracts.md#scheduled-drains) through the real daemons: a drain
asked for with `start_at` ahead is `scheduled` and changes nothing (the node still takes new
instances), then starts within 1 s of its time from the timer heap, also across a luxid
restart; a start time already past starts it now; canceling it submits nothing; `lw node
drain --at` and `drain-status`; the RAPI PUT body's `start_at`.
"""

from __future__ import annotations

import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_cli import Lw
from test_drains_node import add_node, create, follow, messages, placed
from test_jobproc_opcodes import run as ok
from test_rapi import Rapi
from test_rapi import rapi as rapi  # the fixture: lw-rapi on the stack
from test_rapi import stack as stack  # the fixture: wconfd + luxid (with RAPI users)

from client import errors

pytestmark = pytest.mark.timeout(180)

AHEAD = 2.0  # how far ahead a test schedules its drain


def started_event(events: list[list[Any]]) -> list[Any]:
    """The event of the scheduled start."""
    return next(e for e in events if str(e[2]).startswith("scheduled start reached"))


def job_count(stack: Stack) -> int:
    return len(stack.lc.query_jobs(ids=None, fields=["id"]))


def two_nodes(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"))
    ok(stack, create("vm1", 512, "n1"))


def test_a_scheduled_drain_waits_then_starts_on_time(stack: Stack) -> None:
    two_nodes(stack)
    start_at = time.time() + AHEAD
    jobs_before = job_count(stack)
    asked = stack.lc.drain_node(node="n1", start_at=start_at, deadline=600, max_parallel=2)
    assert asked.status == "scheduled" and asked.start_at == start_at
    assert asked.deadline == pytest.approx(start_at + 600)  # from start_at, not from the call
    assert asked.jobs == [] and asked.total == 1
    (listed,) = stack.lc.query_drains()
    assert listed.status == "scheduled" and listed.start_at == start_at
    assert [{"status": "scheduled"}, 1] in stack.lc.get_metrics()["lockwarden_drains"]
    # nothing is marked: the node still takes a new instance, and no job was submitted
    assert stack.wc.get_object(kind="node", key="n1")["drained"] is False
    ok(stack, create("vm2", 512, "n1"))
    assert job_count(stack) == jobs_before + 1
    assert time.time() < start_at, "the setup took longer than AHEAD"

    done, events = follow(stack, "node/n1", lambda s: s.status == "complete", timeout=60)
    assert 0 <= started_event(events)[1] - start_at < 1.0
    assert done.started_at >= start_at and done.deadline == asked.deadline
    assert placed(stack) == {"vm1": "n2", "vm2": "n2"}  # the one placed meanwhile moved too
    text = messages(events)
    assert text[0].startswith("drain scheduled to start at ")
    assert text[-1] == "all instances moved; drain complete"


def test_a_scheduled_start_survives_a_luxid_restart(stack: Stack) -> None:
    two_nodes(stack)
    start_at = time.time() + AHEAD
    stack.lc.drain_node(node="n1", start_at=start_at, deadline=None)
    stack.lc.close()
    stack.luxid.stop()  # down across the start time
    time.sleep(max(0.0, start_at - time.time()) + 0.5)
    assert stack.wc.get_object(kind="node", key="n1")["drained"] is False
    restarted = time.time()
    stack.luxid.start()
    ready = time.time()
    stack.lc = type(stack.lc)(stack.luxid.socket, timeout=30)
    _, events = follow(stack, "node/n1", lambda s: s.status == "complete", timeout=60)
    # a start already past at the restart starts at once, when luxid has resumed
    assert restarted <= started_event(events)[1] < ready + 1.0
    assert placed(stack) == {"vm1": "n2"}


def test_a_start_time_already_past_starts_now(stack: Stack) -> None:
    two_nodes(stack)
    past = time.time() - 3600
    asked = stack.lc.drain_node(node="n1", start_at=past, deadline=600)
    assert asked.status == "draining" and asked.start_at == past
    assert asked.deadline == pytest.approx(asked.started_at + 600)  # from the call
    _, events = follow(stack, "node/n1", lambda s: s.status == "complete")
    stamp = datetime.fromtimestamp(past).astimezone().isoformat(timespec="seconds")
    assert messages(events)[0] == f"start time {stamp} already past; starting now"
    assert placed(stack) == {"vm1": "n2"}


def test_canceling_a_scheduled_drain_changes_nothing(stack: Stack) -> None:
    two_nodes(stack)
    jobs_before = job_count(stack)
    stack.lc.drain_node(node="n1", start_at=time.time() + 1.0)
    canceled = stack.lc.cancel_node_drain(node="n1")  # without keep_drained
    assert canceled.status == "canceled" and canceled.jobs == []
    time.sleep(1.5)  # past the start time it had: still nothing
    (listed,) = stack.lc.query_drains()
    assert listed.status == "canceled" and listed.jobs == []
    assert job_count(stack) == jobs_before
    assert stack.wc.get_object(kind="node", key="n1")["drained"] is False
    assert placed(stack) == {"vm1": "n1"}


def test_errors_say_what_to_do(stack: Stack) -> None:
    two_nodes(stack)
    with pytest.raises(errors.InvalidParams, match="start_at"):
        stack.lc.drain_node(node="n1", start_at=-5)
    stack.lc.drain_node(node="n1", deadline=None, max_parallel=1)
    with pytest.raises(errors.InvalidParams, match=r"already draining.*--disable"):
        stack.lc.drain_node(node="n1", start_at=time.time() + 600)


def test_lw_node_drain_at_schedules_and_drain_status_shows_it(stack: Stack) -> None:
    two_nodes(stack)
    lw = Lw(stack.wconfd.run_dir, stack.wconfd.state_dir)
    when = datetime.fromtimestamp(time.time() + 7200).replace(second=0, microsecond=0)
    out = lw.ok("node", "drain", "n1", "--at", when.isoformat(), "--deadline", "2h")
    shown = when.strftime("%Y-%m-%d %H:%M")
    assert out.startswith(f"drain of n1 scheduled for {shown}: 1 instances to move"), out
    (drain,) = stack.lc.query_drains()  # returned once recorded, not following
    assert drain.status == "scheduled" and drain.start_at == when.timestamp()
    assert drain.deadline == when.timestamp() + 7200
    table = lw.ok("node", "drain-status", "--separator", "|").splitlines()
    assert table[0].startswith("TARGET|STATUS|START_AT|")
    assert table[1].startswith(f"node/n1|scheduled|{shown}|0/1 moved|")
    err = lw.fails(2, "node", "drain", "n1", "--at", "Christmas")
    assert "not an ISO 8601 time: 'Christmas'" in err and "e.g. 2026-12-24T02:00" in err
    lw.ok("node", "drain", "n1", "--disable")
    assert stack.lc.query_drains()[0].status == "canceled"


def test_rapi_put_takes_start_at(rapi: Rapi, stack: Stack) -> None:
    two_nodes(stack)
    start_at = time.time() + AHEAD
    answer = rapi.call("PUT", "/2/nodes/n1/drain", {"start_at": start_at, "deadline": "1h"})
    assert answer.status == 200, answer
    assert answer.body["status"] == "scheduled" and answer.body["start_at"] == start_at
    assert answer.body["deadline"] == pytest.approx(start_at + 3600)
    assert rapi.get("/2/nodes/n1/drain")["status"] == "scheduled"
    _, events = follow(stack, "node/n1", lambda s: s.status == "complete", timeout=60)
    assert 0 <= started_event(events)[1] - start_at < 1.0
    assert rapi.get("/2/nodes/n1/drain")["start_at"] == start_at
