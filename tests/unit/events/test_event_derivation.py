"""The pure derivation of events from changes (docs/contracts.md#events): luxid's job
events (one exactly when the status or pending_reason changed, the first at submit),
wconfd's configuration events (add/update/remove keyed by the object's lock name, the
same live and at replay) and lock events, the durable state numbering them one above the
last, and etcd's indexes from revisions (strictly increasing, never repeated).
"""

from __future__ import annotations

import msgspec
from hypothesis import given, settings
from hypothesis import strategies as st

from client.api.common import Event
from client.audit import AuditEntry
from client.events import EVENT_SLOTS, new_event
from luxid.events import drain_event, drain_flag_event, filter_event, job_event, job_events
from luxid.jobs import Job, new_job
from luxid.storage.etcd_keys import event_indexes
from wconfd.config import ConfigState
from wconfd.config.events import config_event
from wconfd.config.reservations import Reserve
from wconfd.durable_state import AuditNote, DurableState, EventNote, LockChange, Snapshot
from wconfd.locking.events import change_events, waiting_events

NOW = 1_700_000_000.0
STATUSES = ("queued", "waiting", "running", "success", "error", "canceled")
REASONS = (None, "paused by filter x", "slots full")


def job_with(status: str, reason: str | None) -> Job:
    job = new_job(7, [{"OP_ID": "OP_TEST_DELAY", "duration": 1}], NOW)
    op = msgspec.structs.replace(job.ops[0], status=status)
    return msgspec.structs.replace(job, ops=(op,), pending_reason=reason)


@settings(max_examples=200)
@given(st.sampled_from(STATUSES), st.sampled_from(REASONS), st.sampled_from(STATUSES),
       st.sampled_from(REASONS))  # fmt: skip
def test_a_job_event_exactly_when_status_or_pending_reason_changed(s1, r1, s2, r2):
    old, new = job_with(s1, r1), job_with(s2, r2)
    event = job_event(old, new, NOW)
    if (s1, r1) == (s2, r2):
        assert event is None
        return
    assert event is not None
    assert msgspec.to_builtins(event) == {
        "index": 0, "ts": NOW, "daemon": "luxid", "topic": "job", "action": "status",
        "key": "job/7", "data": {"status": s2, "opcode": "OP_TEST_DELAY", "pending_reason": r2},
    }  # fmt: skip


def test_the_first_job_event_is_at_submit_with_the_filters_reason():
    held = job_with("queued", "paused by filter f1")
    (event,) = job_events([(None, held)], NOW)
    assert event.data == {"status": "queued", "opcode": "OP_TEST_DELAY",
                          "pending_reason": "paused by filter f1"}  # fmt: skip


def test_luxid_keys_and_actions():
    node = drain_event("node/n1", "drain complete", NOW)
    assert (node.topic, node.key, node.action) == ("drain", "node/n1", "event")
    assert drain_event("queue", "drain complete", NOW).data == {"message": "drain complete"}
    flag = drain_flag_event(True, NOW)
    assert (flag.topic, flag.key, flag.action) == ("queue", "queue", "drain_flag")
    removed = filter_event("remove", "u1", None, NOW)
    assert (removed.key, removed.action, removed.data) == ("filter/u1", "remove", {"uuid": "u1"})


def test_config_events_add_update_remove_keyed_by_lock_name():
    state = ConfigState.fresh(NOW)
    add = state.add_object("node", {"name": "n1"}, NOW).record
    assert add is not None
    event = config_event(state, add)
    assert (event.topic, event.action, event.key) == ("config", "add", "node/n1")
    state.apply(add)
    node = state.get_object("node", "n1")
    update = state.update_object("node", msgspec.to_builtins(node) | {"offline": True}, NOW + 1)
    assert update.record is not None
    changed = config_event(state, update.record)
    assert (changed.action, changed.key, changed.data["serial"]) == ("update", "node/n1", 2)
    state.apply(update.record)
    remove = state.remove_object("node", "n1", NOW + 2).record
    assert remove is not None
    gone = config_event(state, remove)
    assert (gone.action, gone.key, gone.data["serial"]) == ("remove", "node/n1", 2)
    cluster = msgspec.to_builtins(state.get_object("cluster", None)) | {"name": "other"}
    record = state.update_object("cluster", cluster, NOW).record
    assert record is not None
    event = config_event(state, record)
    assert (event.action, event.key) == ("update", "cluster/BGL")


def test_the_durable_state_numbers_events_one_above_the_last_live_and_at_replay():
    state = DurableState.fresh(NOW)
    records = []
    add = state.config.add_object("node", {"name": "n1"}, NOW).record
    assert add is not None
    records.append(add)
    records.append(LockChange("c1", [("node/n1", "exclusive")]))  # no event of its own
    records.append(EventNote(waiting_events("c2", [["node/n1", "shared"]], NOW)))
    records.append(EventNote([new_event("wconfd", "role", "master", "node/a", {}, NOW)] * 2))
    for record in records:
        state.apply(record)
    assert [e.index for e in state.events.kept()] == [1, 2, 3, 4]
    again = DurableState.from_snapshot(msgspec.json.decode(state.snapshot_json(), type=Snapshot))
    assert again.events.kept() == state.events.kept() and again.events.last == 4


def test_a_replay_in_one_pass_equals_applying_each_record():
    """`replay` (a restart) numbers and keeps the same events and leaves the same state as
    `apply` of each record in turn (live), whatever kinds of record are interleaved."""
    live = DurableState.fresh(NOW)
    start = msgspec.json.decode(live.snapshot_json(), type=Snapshot)
    records: list = []

    def plan(kind: str, data: dict, at: float) -> None:
        record = live.config.add_object(kind, data, at).record
        assert record is not None
        entry = AuditEntry(len(records) + 1, at, "wconfd", "uid:0", 0, 1, None, "add_object",
                           f"{kind}/{data['name']}", "ok")  # fmt: skip
        records.append(AuditNote([entry], record) if len(records) % 2 else record)
        live.apply(records[-1])

    plan("node", {"name": "n1"}, NOW)
    for record in (
        LockChange("c1", [("node/n1", "exclusive")]),
        EventNote(waiting_events("c2", [["node/n1", "shared"]], NOW)),
        Reserve(owner="c1", namespace="mac", value="aa:00:00:00:00:01"),
        AuditNote([AuditEntry(9, NOW, "wconfd", "uid:0", 0, 1, None, "free_locks", "", "ok")]),
    ):
        records.append(record)
        live.apply(record)
    for i in range(5):
        plan("instance", {"name": f"i{i}", "primary_node": "n1"}, NOW + i)
    again = DurableState.from_snapshot(start)
    again.replay(records)
    assert again.snapshot_json() == live.snapshot_json()
    assert again.events.kept() == live.events.kept() and again.events.last == live.events.last


def test_lock_events_name_owner_and_mode():
    events = change_events(
        {"c1": [("node/n1", "exclusive"), ("node/n2", "release")]},
        lambda owner, lock: "shared",
        NOW,
    )
    assert [(e.action, e.key, e.data) for e in events] == [
        ("granted", "node/n1", {"owner": "c1", "mode": "exclusive"}),
        ("released", "node/n2", {"owner": "c1", "mode": "shared"}),
    ]
    assert all(e.topic == "lock" for e in events)


@settings(max_examples=300)
@given(st.lists(st.integers(1, 10**9), max_size=50))
def test_etcd_indexes_only_grow_and_never_repeat(revisions):
    revisions.sort()
    indexes = event_indexes(revisions)
    assert indexes == sorted(set(indexes))
    assert all(i // EVENT_SLOTS == r for i, r in zip(indexes, revisions, strict=True))


def test_event_encodes_as_the_contract_says():
    event = Event(3, NOW, "wconfd", "config", "add", "instance/web1", {"serial": 1})
    assert msgspec.json.decode(msgspec.json.encode(event)) == {
        "index": 3, "ts": NOW, "daemon": "wconfd", "topic": "config", "action": "add",
        "key": "instance/web1", "data": {"serial": 1},
    }  # fmt: skip
