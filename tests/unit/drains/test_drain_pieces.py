"""The drain core's small parts: the timer heap, the view, the capacity key, events."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from luxid.drains import DeadlineHeap, DrainRecord, capacity_key, next_timer, view_from_config
from luxid.drains.record import EVENTS_KEPT, events_since, with_events
from luxid.drains.view import NodeFacts

TARGETS = st.sampled_from([f"node/n{i}" for i in range(6)] + ["queue"])
WHEN = st.one_of(st.none(), st.floats(min_value=0, max_value=100, allow_nan=False))


@given(st.lists(st.tuples(TARGETS, WHEN)), st.floats(min_value=0, max_value=100))
def test_the_heap_fires_exactly_the_latest_timers_due_in_order(sets, now):
    heap = DeadlineHeap()
    latest: dict[str, float | None] = {}
    for target, when in sets:
        heap.set(target, when)
        latest[target] = when
    pending = {t: w for t, w in latest.items() if w is not None}
    assert len(heap) == len(pending)
    assert heap.peek() == (min(pending.values()) if pending else None)
    due = heap.pop_due(now)
    expected = sorted((w, t) for t, w in pending.items() if w <= now)
    assert due == [t for _, t in expected]
    assert heap.pop_due(now) == []
    rest = [w for w in pending.values() if w > now]
    assert heap.peek() == (min(rest) if rest else None)


def test_next_timer_is_the_deadline_until_it_fired_then_the_kill_time():
    record = DrainRecord(target="queue", started_at=0, updated_at=0, deadline=10.0)
    assert next_timer(record) == 10.0
    fired = record.__class__(**{**_fields(record), "deadline_reached": True, "kill_at": 40.0})
    assert next_timer(fired) == 40.0
    done = record.__class__(**{**_fields(record), "status": "complete"})
    assert next_timer(done) is None


def _fields(record: DrainRecord) -> dict:
    return {f: getattr(record, f) for f in record.__struct_fields__}


@given(st.integers(min_value=0, max_value=2500), st.integers(min_value=1, max_value=40))
def test_events_keep_the_last_thousand_and_serials_never_repeat(before, added):
    record = DrainRecord(target="queue", started_at=0, updated_at=0)
    record = with_events(record, 1.0, *(f"e{i}" for i in range(before)))
    record = with_events(record, 2.0, *(f"n{i}" for i in range(added)))
    serials = [e[0] for e in record.events]
    assert serials == list(range(before + added - len(serials) + 1, before + added + 1))
    assert len(record.events) == min(before + added, EVENTS_KEPT)
    assert [e[2] for e in events_since(record, before)] == [f"n{i}" for i in range(added)]


def test_view_from_config_speaks_names_and_defaults_the_capacity():
    doc = {
        "nodes": {"u1": {"name": "node1", "drained": True}, "u2": {"name": "node2", "mtotal": 4096}},
        "instances": {
            "i1": {"name": "web1", "primary_node": "u1", "admin_state": "up", "memory": 512,
                   "vcpus": 2},
        },
        "cluster": {"name": "c"},
    }  # fmt: skip
    view = view_from_config(doc)
    assert view.nodes["node1"].drained and view.nodes["node1"].mtotal == 65536
    assert view.nodes["node2"].mtotal == 4096
    assert view.instances["web1"].primary_node == "node1"
    assert view.on_node("node1") == ["web1"] and view.vcpu_ratio == 4.0


def test_view_from_config_takes_the_cluster_policys_vcpu_ratio():
    # Where wconfd keeps it (OP_CLUSTER_SET_PARAMS vcpu_ratio writes ipolicy["vcpu-ratio"]):
    # the drains place with the same limit as the opcodes.
    doc = {"nodes": {}, "instances": {}, "cluster": {"ipolicy": {"vcpu-ratio": 2.0}}}
    assert view_from_config(doc).vcpu_ratio == 2.0


def test_the_capacity_key_changes_with_room_and_not_with_names_of_things_that_use_none():
    doc = {
        "nodes": {"u1": {"name": "node1"}, "u2": {"name": "node2"}},
        "instances": {
            "i1": {"name": "web1", "primary_node": "u1", "admin_state": "up", "memory": 512},
            "i2": {"name": "web2", "primary_node": "u2", "admin_state": "down", "memory": 512},
        },
    }
    view = view_from_config(doc)
    key = capacity_key(view)
    assert capacity_key(view_from_config(doc)) == key  # stable (stored in records)
    moved_down = view.with_moves([("web2", "node1")])  # a stopped instance takes no room
    assert capacity_key(moved_down) == key
    assert capacity_key(view.with_moves([("web1", "node2")])) != key
    more = dict(view.nodes) | {"node3": NodeFacts(name="node3")}
    assert capacity_key(view.__class__(nodes=more, instances=view.instances)) != key
