"""Which locks each write needs, and the check in "enforce" and "warn" modes."""

from __future__ import annotations

from collections.abc import Callable

import msgspec
import pytest
from cfg_helpers import apply, populated

from client.errors import LockNotHeld
from wconfd.config import Plan, check_locks, locks_for_write, missing_locks


def holding(*locks: str) -> Callable[[str], bool]:
    held = set(locks)
    return lambda lock: lock in held


def plans() -> list[tuple[str, Plan, tuple[str, ...]]]:
    """(kind, plan, expected locks) for an add, update, rename and remove of each kind."""
    state = populated()
    wire = msgspec.to_builtins
    f = apply(state, state.add_object("filter", {}, 1.0))
    g = apply(state, state.add_object("nodegroup", {"name": "g1"}, 1.0))
    return [
        ("node", state.add_object("node", {"name": "n9"}, 1.0), ("node/n9",)),
        (
            "node",
            state.update_object("node", wire(state.get_object("node", "n1")), 1.0),
            ("node/n1",),
        ),
        (
            "node",
            state.update_object("node", wire(state.get_object("node", "n1")) | {"name": "m1"}, 1.0),
            ("node/n1", "node/m1"),
        ),
        (
            "instance",
            state.add_object("instance", {"name": "i9", "primary_node": "n1"}, 1.0),
            ("instance/i9",),
        ),
        ("instance", state.remove_object("instance", "i1", 1.0), ("instance/i1",)),
        ("nodegroup", state.remove_object("nodegroup", g.uuid, 1.0), ("nodegroup/g1",)),
        ("nodegroup", state.add_object("nodegroup", {"name": "g2"}, 1.0), ("nodegroup/g2",)),
        (
            "network",
            state.update_object("network", wire(state.get_object("network", "net1")), 1.0),
            ("network/net1",),
        ),
        (
            "cluster",
            state.update_object("cluster", wire(state.cluster) | {"name": "c"}, 1.0),
            ("cluster/BGL",),
        ),
        ("filter", state.update_object("filter", wire(f), 1.0), ()),
        ("filter", state.remove_object("filter", f.uuid, 1.0), ()),
    ]


@pytest.mark.parametrize(("kind", "plan", "expected"), plans())
def test_locks_needed_per_kind(kind: str, plan: Plan, expected: tuple[str, ...]) -> None:
    assert plan.locks == expected
    # Holding them (or the level's lockset) passes in both modes.
    for mode in ("enforce", "warn"):
        assert check_locks(kind, plan.locks, holding(*expected), mode) is None  # type: ignore[arg-type]
        locksets = {lock.split("/")[0] + "/[lockset]" for lock in expected}
        assert check_locks(kind, plan.locks, holding(*locksets), mode) is None  # type: ignore[arg-type]


@pytest.mark.parametrize(("kind", "plan", "expected"), [p for p in plans() if p[2]])
def test_missing_lock_enforce_and_warn(kind: str, plan: Plan, expected: tuple[str, ...]) -> None:
    with pytest.raises(LockNotHeld) as err:
        check_locks(kind, plan.locks, holding(), "enforce")  # type: ignore[arg-type]
    for lock in expected:
        assert lock in err.value.message
    assert "update_locks_waiting" in err.value.message
    assert err.value.data["locks"] == list(expected)
    warning = check_locks(kind, plan.locks, holding(), "warn")  # type: ignore[arg-type]
    assert warning is not None and expected[0] in warning


def test_rename_needs_both_names() -> None:
    locks = ("node/old", "node/new")
    assert missing_locks(locks, holding("node/old")) == ["node/new"]
    with pytest.raises(LockNotHeld, match="node/new"):
        check_locks("node", locks, holding("node/old"), "enforce")


def test_shared_holder_is_not_enough() -> None:
    """The callable answers 'held exclusively'; a lock held shared answers False."""
    exclusive: set[str] = set()
    with pytest.raises(LockNotHeld):
        check_locks("node", ("node/n1",), lambda lock: lock in exclusive, "enforce")


def test_locks_for_write_direct() -> None:
    state = populated()
    n1 = state.get_object("node", "n1")
    assert locks_for_write("node", None, n1) == ("node/n1",)
    assert locks_for_write("node", n1, None) == ("node/n1",)
    assert locks_for_write("node", n1, n1) == ("node/n1",)
    assert locks_for_write("cluster", state.cluster, state.cluster) == ("cluster/BGL",)
    assert check_locks("cluster", ("cluster/BGL",), holding("cluster/[lockset]"), "enforce") is None
