"""Scheduled drains in the pure core (docs/contracts.md#scheduled-drains): a drain asked for
with a start time ahead waits as `scheduled`, its timer is its start time, it starts as if
called then, a past start time starts it at once, and canceling it changes nothing."""

from __future__ import annotations

import math
from datetime import datetime

import msgspec
import pytest
from drains_testlib import World, cluster
from hypothesis import given
from hypothesis import strategies as st

from client.errors import InvalidParams
from luxid.drains import drain_status, next_timer
from luxid.drains.record import may_act
from luxid.drains.schedule import START_AT_MAX, begins, check_start_at, iso_time, start_due


def world() -> World:
    return World(cluster({"n1": 8192, "n2": 8192}, {"a": ("n1", 1024), "b": ("n1", 1024)}))


def messages(w: World, node: str = "n1") -> list[str]:
    return [text for _, _, text in w.records[f"node/{node}"].events]


def test_a_drain_with_a_start_ahead_changes_nothing_until_then() -> None:
    w = world()
    effects = w.drain("n1", start_at=w.now + 100, deadline=60)
    record = w.records["node/n1"]
    assert effects == [] and record.status == "scheduled" and record.active == ()
    assert record.start_at == w.now + 100 and record.started_at == w.now + 100
    assert record.deadline == w.now + 160  # counts from start_at, not from the call
    assert next_timer(record) == w.now + 100
    assert not may_act(record)  # configuration changes do not wake it
    assert messages(w)[0] == f"drain scheduled to start at {iso_time(w.now + 100)}"
    status = drain_status(record, w.view, {})
    assert status.status == "scheduled" and status.start_at == w.now + 100
    assert status.remaining == 2  # what it will move
    w.now += 99.9
    assert w.step() == [] and w.records["node/n1"].status == "scheduled"


def test_at_its_start_it_runs_as_if_called_then() -> None:
    w = world()
    w.drain("n1", start_at=w.now + 100, deadline=60, max_parallel=2)
    w.now += 100
    effects = w.step()
    record = w.records["node/n1"]
    assert record.status == "draining" and record.started_at == w.now
    assert [e.kind for e in effects] == ["drained"]  # marked first, as any drain
    assert next_timer(record) == record.deadline == w.now + 60
    assert any(m.startswith("scheduled start reached") for m in messages(w))
    w.finish_all()
    assert [e.kind for e in w.step()] == ["migrate", "migrate"]
    w.finish_all()
    w.step()
    assert w.records["node/n1"].status == "complete"


def test_a_start_already_past_starts_now_and_says_so() -> None:
    w = world()
    effects = w.drain("n1", start_at=w.now - 30, deadline=60)
    record = w.records["node/n1"]
    assert record.status == "draining" and record.started_at == w.now
    assert record.deadline == w.now + 60  # from the call, the later of the two
    assert [e.kind for e in effects] == ["drained"]
    assert messages(w)[0] == f"start time {iso_time(w.now - 30)} already past; starting now"


def test_canceling_a_scheduled_drain_submits_nothing_and_leaves_the_node() -> None:
    w = world()
    w.drain("n1", start_at=w.now + 100)
    effects = w.cancel("n1")  # not keep_drained: still nothing to undo
    record = w.records["node/n1"]
    assert effects == [] and record.status == "canceled" and not record.undrain
    assert next_timer(record) is None
    w.now += 200
    assert w.step() == [] and w.records["node/n1"].status == "canceled"
    assert not w.view.nodes["n1"].drained


def test_a_scheduled_node_is_still_a_target_for_other_drains() -> None:
    w = world()
    w.drain("n2", start_at=w.now + 100)
    w.drain("n1")
    w.finish_all()
    moves = [e for e in w.step() if e.kind == "migrate"]
    assert {m.node for m in moves} == {"n2"}


def test_asking_again_reschedules_or_starts_now() -> None:
    w = world()
    w.drain("n1", start_at=w.now + 100)
    w.drain("n1", start_at=w.now + 50, deadline=10)
    record = w.records["node/n1"]
    assert record.status == "scheduled" and next_timer(record) == w.now + 50
    effects = w.drain("n1")  # without a start time: now
    assert w.records["node/n1"].status == "draining" and [e.kind for e in effects] == ["drained"]


def test_a_drain_in_progress_cannot_be_moved_to_later() -> None:
    w = world()
    w.drain("n1")
    with pytest.raises(InvalidParams, match=r"already draining.*--disable") as exc:
        w.drain("n1", start_at=w.now + 100)
    assert exc.value.data["param"] == "start_at"
    w.drain("n1", start_at=w.now - 1, max_parallel=3)  # a past one just updates it
    assert w.records["node/n1"].max_parallel == 3


@pytest.mark.parametrize("bad", [-1.0, math.nan, math.inf, START_AT_MAX + 1])
def test_bad_start_times_name_the_param(bad: float) -> None:
    with pytest.raises(InvalidParams, match="param `start_at`: must be an absolute time") as exc:
        check_start_at(bad)
    assert exc.value.data["param"] == "start_at"


def test_an_old_record_without_start_at_loads_as_null() -> None:
    w = world()
    w.drain("n1")
    wire = msgspec.to_builtins(w.records["node/n1"])
    del wire["start_at"]
    assert msgspec.convert(wire, type(w.records["node/n1"])).start_at is None


@given(
    start=st.one_of(st.none(), st.floats(0, 4e9)),
    now=st.floats(1e9, 3e9),
    deadline=st.one_of(st.none(), st.floats(0, 1e6)),
)
def test_deadline_counts_from_the_later_of_start_and_call(
    start: float | None, now: float, deadline: float | None
) -> None:
    w = World(cluster({"n1": 1024}, {}), now=now)
    w.drain("n1", start_at=start, deadline=deadline)
    record = w.records["node/n1"]
    begin, later = begins(start, now)
    assert begin == max(now, start if start is not None else now)
    assert record.deadline == (None if deadline is None else begin + deadline)
    assert (record.status == "scheduled") == later
    assert start_due(record, begin).status != "scheduled"
    if later:
        assert start_due(record, math.nextafter(begin, 0)).status == "scheduled"


def test_iso_time_is_local_with_offset() -> None:
    when = datetime(2026, 12, 24, 2, 0).timestamp()  # local
    assert iso_time(when).startswith("2026-12-24T02:00:00")
    assert datetime.fromisoformat(iso_time(when)).timestamp() == when
