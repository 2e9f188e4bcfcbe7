"""Property: after any sequence of config operations, snapshots and restarts, loading the
snapshot and replaying the journal gives exactly the live state."""

from __future__ import annotations

import asyncio
import itertools
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.errors import RpcError, StorageError
from wconfd.config import ConfigChange, ConfigDocument, ConfigState
from wconfd.storage import LocalStore, recover

Store = LocalStore[ConfigDocument, ConfigChange]

NAMES = st.sampled_from(["a", "b", "c", "d"])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add_node"), NAMES, st.sampled_from(["default", "g1"])),
        st.tuples(st.just("add_group"), st.just("g1"), st.just("")),
        st.tuples(st.just("add_instance"), NAMES, NAMES),
        st.tuples(st.just("update_node"), NAMES, st.sampled_from(["offline", "drained"])),
        st.tuples(st.just("rename"), st.sampled_from(["node", "instance"]), NAMES),
        st.tuples(st.just("remove"), st.sampled_from(["node", "instance", "nodegroup"]), NAMES),
        st.tuples(st.just("filter"), st.integers(0, 3), st.just("")),
        st.tuples(st.just("cluster"), st.integers(1, 50), st.just("")),
        st.tuples(st.just("snapshot"), st.just(""), st.just("")),
        st.tuples(st.just("reopen"), st.just(""), st.just("")),
    ),
    max_size=30,
)


def open_config(path: Path, journal_limit: int = 1 << 20) -> tuple[Store, ConfigState]:
    """The daemon's start-up: recover the config from its store (fresh on first start)."""
    store: Store = LocalStore(
        path,
        "config",
        snapshot_type=ConfigDocument,
        record_type=ConfigChange,
        journal_limit=journal_limit,
    )
    counter = itertools.count()
    state = recover(
        store,
        initial=lambda: ConfigState.fresh(1.0, lambda: f"fresh-{next(counter)}"),
        from_snapshot=ConfigState,
        apply=ConfigState.apply,
        to_snapshot=ConfigState.get_config_json,
    )
    return store, state


def plan_for(state: ConfigState, op: tuple[str, Any, Any], now: float, uuid: Any) -> Any:
    """The plan of one random operation (raises the RpcError a daemon would answer)."""
    name, a, b = op
    wire = msgspec.to_builtins
    if name == "add_node":
        return state.add_object("node", {"name": a, "group": b}, now, new_uuid=uuid)
    if name == "add_group":
        return state.add_object("nodegroup", {"name": a}, now, new_uuid=uuid)
    if name == "add_instance":
        mac = f"aa:00:00:00:00:{ord(a):02x}"
        return state.add_object(
            "instance",
            {"name": f"i{a}", "primary_node": b, "nics": [{"mac": mac}], "disks": [{"size": 1}]},
            now,
            new_uuid=uuid,
        )
    if name == "update_node":
        node = wire(state.get_object("node", a))
        return state.update_object("node", node | {b: not node[b]}, now)
    if name == "rename":
        kind, key = a, (b if a == "node" else f"i{b}")
        obj = wire(state.get_object(kind, key))
        return state.update_object(kind, obj | {"name": obj["name"] + "x"}, now)
    if name == "remove":
        return state.remove_object(a, b if a != "instance" else f"i{b}", now)
    if name == "filter":
        return state.add_object("filter", {"priority": a}, now, new_uuid=uuid)
    if name == "cluster":
        return state.update_object("cluster", wire(state.cluster) | {"max_running_jobs": a}, now)
    raise AssertionError(name)


def record_of(
    state: ConfigState, op: tuple[str, Any, Any], step: int, ids: Iterator[int]
) -> ConfigChange | None:
    """The record of operation number `step` planned on `state`; None when the plan fails
    (the error a daemon would answer) or changes nothing."""
    try:
        record: ConfigChange | None = plan_for(
            state, op, 10.0 + step, lambda: f"u{next(ids)}"
        ).record
    except RpcError:
        return None
    return record


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_replay_equals_live_state(ops: list[tuple[str, Any, Any]]) -> None:
    with tempfile.TemporaryDirectory(dir=None) as tmp:
        path = Path(tmp)
        store, state = open_config(path, journal_limit=2048)
        ids = itertools.count()
        for step, op in enumerate(ops):
            if op[0] == "snapshot":
                store.snapshot_sync(state.get_config_json())
                continue
            if op[0] == "reopen":
                store.close()
                live = state.get_config_json()
                store, state = open_config(path, journal_limit=2048)
                assert state.get_config_json() == live
                continue
            record = record_of(state, op, step, ids)
            if record is not None:
                store.append_sync(record)
                state.apply(record)
            if store.snapshot_due:
                store.snapshot_sync(state.get_config_json())
        store.close()
        _, replayed = open_config(path)
        assert replayed.get_config_json() == state.get_config_json()


def test_async_live_path_with_failure_and_replay(tmp_path: Path) -> None:
    """The daemon's live path: plan → append(on_durable=apply); a storage failure leaves
    memory unchanged; a restart replays to the same state."""
    from storage_helpers import ENOSPC, FaultyOps

    async def main() -> bytes:
        ops = FaultyOps()
        store, state = open_config(tmp_path)
        store._files.ops = ops  # inject faults after start-up
        lock = asyncio.Lock()

        async def write(kind: str, data: dict[str, Any]) -> Any:
            async with lock:  # config writes are serialised: plans read the state
                plan = state.add_object(kind, data, time.time())
                assert plan.record is not None
                await store.append(plan.record, on_durable=state.apply)
                return plan.result

        await asyncio.gather(*[write("node", {"name": f"n{i}"}) for i in range(20)])
        before = state.get_config_json()
        ops.fail["pwrite_dsync"] = ENOSPC
        ops.once = True
        try:
            await write("node", {"name": "doomed"})
        except StorageError:
            pass
        else:
            raise AssertionError("no StorageError")
        assert state.get_config_json() == before
        await write("node", {"name": "after"})
        await store.snapshot(state.get_config_json())
        await write("instance", {"name": "i1", "primary_node": "after"})
        await store.aclose()
        return state.get_config_json()

    live = asyncio.run(main())
    store, state = open_config(tmp_path)
    store.close()
    assert state.get_config_json() == live
    assert state.find("node", "doomed") is None and state.find("node", "after") is not None


INDEXES = ("names", "node_refs", "group_nodes", "net_refs", "macs")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS, st.integers(0, 30), st.sampled_from(["names", "macs", None]))
def test_indexes_built_after_a_replay_equal_live_ones(
    ops: list[tuple[str, Any, Any]], read_at: int, read: str | None
) -> None:
    """A state loaded in bulk (a trusted snapshot, records applied with its indexes not
    built yet) has, once they are read, the indexes a live state kept up to date; also
    when one group of them was read part way through the replay."""
    live = ConfigState(ConfigState.fresh(1.0, lambda: "g0").get_config(), validate=True)
    start = live.get_config()
    ids = itertools.count()
    records = []
    for step, op in enumerate(ops):
        if op[0] in ("snapshot", "reopen"):
            continue
        record = record_of(live, op, step, ids)
        if record is not None:
            live.apply(record)
            records.append(record)
    bulk = ConfigState(start, validate=False)
    for step, record in enumerate(records):
        if step == read_at and read is not None:
            getattr(bulk._idx, read)  # this group is kept up to date from here on
        bulk.apply(record)
    assert bulk.get_config_json() == live.get_config_json()
    for index in INDEXES:
        assert getattr(bulk._idx, index) == getattr(live._idx, index), index
