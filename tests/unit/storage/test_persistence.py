"""Persistence's group commit: a record that cannot be stored fails only its own write."""

from __future__ import annotations

import asyncio

import pytest

from client.errors import InvalidParams
from wconfd.config.reservations import Reserve
from wconfd.durable_state import LockChange, Record, Snapshot
from wconfd.persistence import Persistence, check_record, load_durable_state, open_local_store
from wconfd.storage import LocalStore


def test_check_record_names_the_wide_number():
    check_record(LockChange("c", [("node/a", "shared")]))
    with pytest.raises(InvalidParams, match=r"record\.value: .* does not fit in signed 64 bits"):
        check_record(Reserve(owner="o", namespace="ip", value=2**70))  # type: ignore[arg-type]


def test_unstorable_record_fails_alone_in_its_group(tmp_path):
    async def run() -> tuple[list[object], int]:
        store = open_local_store(tmp_path)
        persistence = Persistence(store, load_durable_state(store))
        try:

            def good(i: int):
                return lambda now: (Reserve(owner="a", namespace="ip", value=f"10.0.0.{i}"), i)

            def bad(now: float):
                return Reserve(owner="a", namespace="ip", value=2**70), None  # type: ignore[arg-type]

            plans = [good(1), good(2), bad, good(3), good(4)]
            outcomes = await asyncio.gather(
                *(persistence.submit(p) for p in plans), return_exceptions=True
            )
            return outcomes, persistence.state.reservations.count("a")
        finally:
            persistence.close()

    outcomes, held = asyncio.run(run())
    assert outcomes[:2] == [1, 2] and outcomes[3:] == [3, 4]
    assert isinstance(outcomes[2], InvalidParams)
    assert held == 4
    # and the durable state says the same after a reload
    store = open_local_store(tmp_path)
    try:
        assert load_durable_state(store).reservations.count("a") == 4
    finally:
        store.close()


@pytest.mark.parametrize("indent", [-1, 2])  # as written now; as older daemons wrote it
def test_a_reloaded_snapshot_keeps_its_events_compact(tmp_path, indent):
    """Events come back from a checked snapshot as the compact JSON they were kept as,
    however the file is laid out: they go verbatim into answers and the next snapshot."""
    store = open_local_store(tmp_path)
    state = load_durable_state(store)
    for i in range(3):
        state.apply(state.config.add_object("node", {"name": f"n{i}"}, 1.0 + i).record)
    kept = [bytes(raw) for raw in state.events.kept_json()]
    store.close()
    store = LocalStore(
        tmp_path, "wconfd", snapshot_type=Snapshot, record_type=Record, indent=indent
    )
    store.open()
    store.snapshot_sync(state.snapshot_json(), 0)
    store.close()
    store = open_local_store(tmp_path)
    try:
        again = load_durable_state(store)
    finally:
        store.close()
    assert [bytes(raw) for raw in again.events.kept_json()] == kept
    assert all(b"\n" not in raw and b": " not in raw for raw in kept)
