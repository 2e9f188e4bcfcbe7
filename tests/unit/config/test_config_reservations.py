"""Temporary reservations: conflicts, MACs against the config, owners, durability form."""

from __future__ import annotations

import random

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.errors import InvalidParams, ReservationError
from wconfd.config import (
    Release,
    ReleaseAll,
    ReservationChange,
    ReservationConflict,
    ReservationSnapshot,
    ReservationTable,
    Reserve,
)


def do(table: ReservationTable, record: ReservationChange | None) -> None:
    if record is not None:
        table.apply(record)


def test_reserve_conflict_and_same_owner_noop() -> None:
    t = ReservationTable()
    rec = t.reserve("a", "ip", "10.0.0.1")
    assert rec == Reserve(owner="a", namespace="ip", value="10.0.0.1")
    assert t.list_reservations() == []  # planned, not applied
    do(t, rec)
    assert t.reserve("a", "ip", "10.0.0.1") is None
    with pytest.raises(ReservationError, match="reserved by a"):
        t.reserve("b", "ip", "10.0.0.1")
    # Same value in another namespace is independent.
    do(t, t.reserve("b", "lv", "10.0.0.1"))
    assert t.list_reservations() == [["a", "ip", "10.0.0.1"], ["b", "lv", "10.0.0.1"]]
    assert t.list_reservations("b") == [["b", "lv", "10.0.0.1"]]


def test_mac_normalised_and_checked_against_config() -> None:
    t = ReservationTable()
    used = {"aa:00:00:00:00:01"}
    with pytest.raises(ReservationError, match="used in the configuration"):
        t.reserve("a", "mac", "AA:00:00:00:00:01", in_config=used.__contains__)
    do(t, t.reserve("a", "mac", "AA:00:00:00:00:02", in_config=used.__contains__))
    assert t.owner_of("mac", "aa:00:00:00:00:02") == "a"
    with pytest.raises(ReservationError):
        t.reserve("b", "mac", "aa:00:00:00:00:02")
    with pytest.raises(InvalidParams, match="value"):
        t.reserve("a", "mac", "not-a-mac")
    with pytest.raises(InvalidParams, match="namespace"):
        t.reserve("a", "", "x")
    with pytest.raises(InvalidParams, match="value"):
        t.reserve("a", "ip", 5)  # type: ignore[arg-type]


def test_release_one_namespace_all_and_remove_owner() -> None:
    t = ReservationTable()
    for owner in ("a", "b"):
        for ns in ("ip", "lv"):
            for v in ("1", "2"):
                do(t, t.reserve(owner, ns, f"{owner}{v}"))
    assert t.release_reservation("a", "ip", "b1") is None  # not a's
    do(t, t.release_reservation("a", "ip", "a1"))
    assert t.count("a") == 3
    do(t, t.release_reservations("a", "lv"))
    assert t.list_reservations("a") == [["a", "ip", "a2"]]
    assert t.release_reservations("a", "lv") is None
    do(t, t.remove_owner("b"))
    assert t.owners() == ["a"]
    assert t.remove_owner("b") is None
    do(t, t.release_reservations("a"))
    assert t.owners() == [] and t.list_reservations() == []


def test_generate_mac_unique_against_config_and_reservations() -> None:
    t = ReservationTable()
    rng = random.Random(1)
    macs = set()
    for _ in range(50):
        mac, rec = t.generate_mac("a", "AA:00:00", rng, in_config=lambda m: m.endswith(":00"))
        assert mac.startswith("aa:00:00:") and not mac.endswith(":00")
        assert rec == Reserve(owner="a", namespace="mac", value=mac)
        t.apply(rec)
        macs.add(mac)
    assert len(macs) == 50


def test_generate_mac_gives_up_after_bounded_tries() -> None:
    class Stuck:
        def getrandbits(self, k: int) -> int:
            return 0x010203

    t = ReservationTable()
    mac, rec = t.generate_mac("a", "aa:00:00", Stuck())
    assert mac == "aa:00:00:01:02:03"
    t.apply(rec)
    with pytest.raises(ReservationError, match="no free MAC"):
        t.generate_mac("b", "aa:00:00", Stuck())
    with pytest.raises(ReservationError):
        ReservationTable().generate_mac("b", "aa:00:00", Stuck(), in_config=lambda m: True)


def test_apply_conflict_is_a_bug() -> None:
    t = ReservationTable()
    t.apply(Reserve(owner="a", namespace="ip", value="x"))
    with pytest.raises(ReservationConflict):
        t.apply(Reserve(owner="b", namespace="ip", value="x"))


def test_snapshot_round_trip() -> None:
    t = ReservationTable()
    do(t, t.reserve("job-1:1:1.0", "mac", "aa:00:00:00:00:05"))
    do(t, t.reserve("job-2:2:2.0", "ip", "10.0.0.9"))
    snap = t.snapshot()
    data = msgspec.json.encode(snap)
    again = ReservationTable.from_snapshot(msgspec.json.decode(data, type=ReservationSnapshot))
    assert again == t
    assert again.list_reservations() == t.list_reservations()
    records = [
        Reserve(owner="a", namespace="n", value="v"),
        Release(owner="a", namespace="n", value="v"),
        ReleaseAll(owner="a", namespace=None),
    ]
    encoded = msgspec.msgpack.encode(records)
    assert msgspec.msgpack.decode(encoded, type=list[ReservationChange]) == records


OPS = st.lists(
    st.tuples(
        st.sampled_from(["reserve", "release", "release_ns", "release_all", "remove"]),
        st.sampled_from(["a", "b", "c"]),
        st.sampled_from(["mac", "ip"]),
        st.sampled_from(["aa:00:00:00:00:01", "aa:00:00:00:00:02", "AA:00:00:00:00:03"]),
    ),
    max_size=40,
)


@given(OPS)
def test_model_and_replay(ops: list[tuple[str, str, str, str]]) -> None:
    """The table matches a dict model, and replaying its records rebuilds it."""
    t = ReservationTable()
    model: dict[tuple[str, str], str] = {}
    log: list[ReservationChange] = []
    for op, owner, ns, value in ops:
        v = value.lower() if ns == "mac" else value
        rec: ReservationChange | None
        if op == "reserve":
            holder = model.get((ns, v))
            if holder not in (None, owner):
                with pytest.raises(ReservationError):
                    t.reserve(owner, ns, value)
                continue
            rec = t.reserve(owner, ns, value)
            model[(ns, v)] = owner
        elif op == "release":
            rec = t.release_reservation(owner, ns, value)
            if model.get((ns, v)) == owner:
                del model[(ns, v)]
        else:
            only = ns if op == "release_ns" else None
            rec = t.remove_owner(owner) if op == "remove" else t.release_reservations(owner, only)
            for key in [k for k, o in model.items() if o == owner and only in (None, k[0])]:
                del model[key]
        if rec is not None:
            t.apply(rec)
            log.append(rec)
        assert sorted(t.list_reservations()) == sorted([o, n, x] for (n, x), o in model.items())
    replayed = ReservationTable()
    for rec in log:
        replayed.apply(rec)
    assert replayed == t
    assert ReservationTable.from_snapshot(t.snapshot()) == t
