"""The `drain` kind (docs/contracts.md#configuration-document): keyed by its target, no lock,
luxid's state kept."""

from __future__ import annotations

import msgspec
import pytest

from client.drains import DrainJob
from client.errors import AlreadyExists, ConfigValidationError, StaleObjectError
from wconfd.config import ConfigState


def _add(state: ConfigState, obj: dict, now: float = 2.0):  # type: ignore[no-untyped-def]
    plan = state.add_object("drain", obj, now)
    assert plan.locks == ()  # queue control never waits for the queue
    assert plan.record is not None
    state.apply(plan.record)
    return plan.result


def test_drain_is_keyed_by_target_and_survives_a_snapshot() -> None:
    state = ConfigState.fresh(1.0)
    added = _add(state, {"target": "node/n1", "active": [{"id": 3, "kind": "migrate"}]})
    assert added.uuid == "node/n1" and added.serial_no == 1
    got = state.get_object("drain", "node/n1")
    assert got.active == (DrainJob(id=3, kind="migrate"),)
    plan = state.update_object("drain", msgspec.to_builtins(got) | {"status": "complete"}, 3.0)
    assert plan.record is not None
    state.apply(plan.record)
    again = ConfigState.from_json(state.get_config_json())
    (drain,) = again.list_objects("drain")
    assert drain.status == "complete" and drain.serial_no == 2
    assert msgspec.to_builtins(again.get_config())["drains"]["node/n1"]["target"] == "node/n1"


def test_drain_writes_are_checked() -> None:
    state = ConfigState.fresh(1.0)
    _add(state, {"target": "queue", "mode": "soft"})
    with pytest.raises(AlreadyExists):
        state.add_object("drain", {"target": "queue"}, 2.0)
    with pytest.raises(ConfigValidationError, match="target"):
        state.add_object("drain", {"target": "n1"}, 2.0)
    with pytest.raises(ConfigValidationError, match="uuid"):
        state.add_object("drain", {"target": "node/n1", "uuid": "other"}, 2.0)
    with pytest.raises(ConfigValidationError, match="max_parallel"):
        state.add_object("drain", {"target": "node/n1", "max_parallel": 0}, 2.0)
    with pytest.raises(StaleObjectError):
        state.update_object("drain", {"target": "queue", "serial_no": 7}, 3.0)
