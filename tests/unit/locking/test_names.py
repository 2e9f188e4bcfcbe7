"""Lock names, levels, order and request parsing (docs/contracts.md#lock-names-and-order, rule 1;
Ganeti Locks.hs props)."""

from __future__ import annotations

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client.errors import InvalidParams
from wconfd.locking.names import (
    BGL,
    LEVELS,
    LOCKSET,
    check_priority,
    conflicts,
    lock_key,
    lockset_name,
    parse_level,
    parse_lock,
    parse_names,
    parse_request,
    sort_locks,
)

member_names = st.text(
    alphabet=st.characters(blacklist_characters="/", blacklist_categories=("Cs",)), min_size=1
).filter(lambda s: s != LOCKSET)


@st.composite
def lock_names(draw: st.DrawFn) -> str:
    """Any valid lock name."""
    level = draw(st.sampled_from(LEVELS))
    if level == "cluster":
        return draw(st.sampled_from([BGL, lockset_name(0)]))
    if draw(st.booleans()):
        return f"{level}/{LOCKSET}"
    return f"{level}/{draw(member_names)}"


@settings(deadline=None, max_examples=300)
@given(lock_names())
def test_lock_name_round_trips(name: str) -> None:
    lock = parse_lock(name)
    assert lock.name == name
    assert msgspec.json.decode(msgspec.json.encode(name)) == name
    assert parse_lock(msgspec.json.decode(msgspec.json.encode(lock.name))).key == lock.key
    assert LEVELS[lock.level] == name.split("/", 1)[0]


@settings(deadline=None)
@given(st.sampled_from(LEVELS))
def test_level_round_trips(level: str) -> None:
    assert LEVELS[parse_level(level)] == level
    assert parse_lock(lockset_name(parse_level(level))).is_set


@settings(deadline=None, max_examples=300)
@given(lock_names())
def test_implied_locks_sort_earlier(name: str) -> None:
    lock = parse_lock(name)
    implied = lock.implied()
    if lock.is_set:
        assert implied is None
    else:
        assert implied is not None and implied.is_set
        assert implied.key < lock.key
        assert implied.level == lock.level


@settings(deadline=None, max_examples=300)
@given(lock_names(), lock_names())
def test_interval_property(a: str, b: str) -> None:
    """Every lock between a lockset and its member in the order belongs to that level."""
    member, other = parse_lock(a), parse_lock(b)
    implied = member.implied()
    if implied is not None and implied.key <= other.key <= member.key:
        assert other.level == member.level


@settings(deadline=None, max_examples=300)
@given(st.lists(lock_names(), max_size=8))
def test_order_is_total_and_level_major(names: list[str]) -> None:
    ordered = sort_locks(names)
    keys = [lock_key(n) for n in ordered]
    assert keys == sorted(keys)
    levels = [parse_lock(n).level for n in ordered]
    assert levels == sorted(levels)


def test_order_examples() -> None:
    order = [
        "cluster/[lockset]",
        "cluster/BGL",
        "instance/[lockset]",
        "instance/a",
        "instance/b",
        "nodegroup/[lockset]",
        "nodegroup/default",
        "node/[lockset]",
        "node/A",
        "node/a",
        "node-res/[lockset]",
        "node-res/a",
        "network/[lockset]",
        "network/net1",
    ]
    assert sort_locks(reversed(order)) == order


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("node", "malformed lock name 'node'"),
        ("nodes/a", "unknown lock level 'nodes'"),
        ("node/", "malformed lock name 'node/'"),
        ("node/a/b", "malformed lock name 'node/a/b'"),
        ("cluster/foo", "unknown lock 'cluster/foo'"),
        ("cluster/config", "unknown lock 'cluster/config'"),
        ("/a", "unknown lock level ''"),
        (42, "lock name must be a string"),
        (None, "lock name must be a string"),
        (["node/a"], "lock name must be a string"),
    ],
)
def test_bad_lock_names(name: object, fragment: str) -> None:
    with pytest.raises(InvalidParams) as info:
        parse_lock(name)
    assert fragment in info.value.message


@pytest.mark.parametrize(
    ("request_", "fragment"),
    [
        ("node/a", "request must be a list"),
        ([["node/a"]], "request[0] must be a [lock, mode] pair"),
        ([["node/a", "shared", "x"]], "request[0] must be a [lock, mode] pair"),
        (["ab"], "request[0] must be a [lock, mode] pair"),
        ([["node/a", "shared"], ["node/b", "owned"]], "request[1]: bad mode 'owned' for node/b"),
        ([["node/a", None]], "bad mode None"),
        ([["node/a", "shared"], ["node/a", "exclusive"]], "inconsistent pairs for lock node/a"),
        ([["node/a", "release"], ["node/a", "shared"]], "inconsistent pairs for lock node/a"),
        ([["bogus/a", "shared"]], "unknown lock level 'bogus'"),
    ],
)
def test_bad_requests(request_: object, fragment: str) -> None:
    with pytest.raises(InvalidParams) as info:
        parse_request(request_)
    assert fragment in info.value.message


def test_request_parsing() -> None:
    pairs = parse_request(
        [["node/a", "shared"], ["node/a", "shared"], ("node/b", "release"), ["node/c", "exclusive"]]
    )
    assert [(lk.name, m) for lk, m in pairs] == [
        ("node/a", "shared"),
        ("node/b", "release"),
        ("node/c", "exclusive"),
    ]
    assert parse_request([]) == []
    with pytest.raises(InvalidParams, match="allowed: shared, exclusive"):
        parse_request([["node/a", "release"]], allow_release=False)
    assert [lk.name for lk in parse_names(["node/a", "cluster/BGL"])] == ["node/a", BGL]
    with pytest.raises(InvalidParams, match="locks must be a list"):
        parse_names("node/a")


def test_levels_and_priorities() -> None:
    assert [parse_level(lv) for lv in LEVELS] == list(range(6))
    for bad in ("config", "", None, 3):
        with pytest.raises(InvalidParams, match="unknown lock level"):
            parse_level(bad)
    assert check_priority(-20) == -20 and check_priority(19) == 19
    for bad in (-21, 20, 1.0, "0", True, None):
        with pytest.raises(InvalidParams, match="priority"):
            check_priority(bad)


@pytest.mark.parametrize(
    ("a", "ma", "b", "mb", "expected"),
    [
        ("node/a", "shared", "node/a", "shared", False),
        ("node/a", "shared", "node/a", "exclusive", True),
        ("node/a", "exclusive", "node/a", "exclusive", True),
        ("node/a", "exclusive", "node/b", "exclusive", False),
        ("node/[lockset]", "shared", "node/a", "shared", False),
        ("node/[lockset]", "shared", "node/a", "exclusive", True),
        ("node/[lockset]", "exclusive", "node/a", "shared", True),
        ("node/a", "shared", "node/[lockset]", "exclusive", True),
        ("node/[lockset]", "exclusive", "instance/a", "exclusive", False),
        ("node/[lockset]", "exclusive", "node-res/a", "exclusive", False),
        ("cluster/[lockset]", "shared", "cluster/BGL", "exclusive", True),
        ("node/[lockset]", "shared", "node/[lockset]", "exclusive", True),
        ("node/[lockset]", "shared", "node/[lockset]", "shared", False),
    ],
)
def test_conflict_table(a: str, ma: str, b: str, mb: str, expected: bool) -> None:
    assert conflicts(parse_lock(a), ma, parse_lock(b), mb) is expected
    assert conflicts(parse_lock(b), mb, parse_lock(a), ma) is expected
