"""The shared vocabulary (client.vocabulary, client.api.numbers, client.api.opcodes): lock
names parse and format back, the lock key is the total order of
docs/contracts.md#lock-names-and-order, the number check
finds exactly the numbers a client may not send and names where they are."""

from __future__ import annotations

import math
from typing import Any

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client import errors, vocabulary
from client.api.numbers import INT64_MAX, INT64_MIN, check_numbers
from client.api.opcodes import OpcodeCommon, check_opcode_common
from client.vocabulary import (
    BGL,
    LEVELS,
    LOCKSET,
    lock_key,
    lock_name,
    lockset_name,
    split_lock_name,
)

members = st.text(min_size=1).filter(lambda s: "/" not in s)
names = st.one_of(
    st.sampled_from([BGL, lockset_name("cluster")]),
    st.builds(lambda lv, m: lock_name(lv, m), st.sampled_from(LEVELS[1:]), members),
    st.sampled_from(LEVELS[1:]).map(lockset_name),
)


@given(names)
def test_a_lock_name_splits_and_formats_back(name):
    assert lock_name(*split_lock_name(name)) == name


@given(names, names)
def test_lock_key_is_the_total_order_of_spec_4_1(a, b):
    (la, ma), (lb, mb) = split_lock_name(a), split_lock_name(b)
    if la != lb:
        expected = LEVELS.index(la) < LEVELS.index(lb)
    elif (ma == LOCKSET) != (mb == LOCKSET):
        expected = ma == LOCKSET
    else:
        expected = ma < mb
    assert (lock_key(a) < lock_key(b)) == expected
    assert (lock_key(a) == lock_key(b)) == (a == b)


@pytest.mark.parametrize("bad", ["node", "nope/x", "node/", "node/a/b", "cluster/other", "/x"])
def test_malformed_lock_names_say_what_is_wrong(bad):
    with pytest.raises(ValueError, match=r"lock|level"):
        lock_key(bad)


def test_the_common_opcode_params_are_the_typed_ones():
    typed = set(OpcodeCommon.__struct_fields__) - {"OP_ID"}
    assert typed == set(vocabulary.COMMON_OPCODE_PARAMS)
    assert vocabulary.DEFAULT_PRIORITY in range(
        vocabulary.PRIORITY_MIN, vocabulary.PRIORITY_MAX + 1
    )


@given(st.integers(min_value=-30, max_value=30))
def test_opcode_priority_is_checked_against_the_range(priority):
    op = {"OP_ID": "OP_TEST_DELAY", "priority": priority, "duration": 1}
    if vocabulary.PRIORITY_MIN <= priority <= vocabulary.PRIORITY_MAX:
        check_opcode_common(op)
    else:
        with pytest.raises(errors.InvalidOpcode) as info:
            check_opcode_common(op)
        assert info.value.data["param"] == "priority"


# -- numbers ----------------------------------------------------------------------------

leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.text(max_size=3),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
)
values = st.recursive(
    leaves,
    lambda kids: (
        st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=3), kids, max_size=3)
    ),
    max_leaves=12,
)


def _bad_paths(value: Any, path: str) -> list[str]:
    """Reference: the path of every bad number, in document order."""
    if isinstance(value, bool):
        return []
    if isinstance(value, int):
        return [] if INT64_MIN <= value <= INT64_MAX else [path]
    if isinstance(value, float):
        return [] if math.isfinite(value) else [path]
    if isinstance(value, list):
        return [p for i, v in enumerate(value) for p in _bad_paths(v, f"{path}[{i}]")]
    if isinstance(value, dict):
        return [p for k, v in value.items() for p in _bad_paths(v, f"{path}.{k}")]
    return []


@given(values)
def test_check_numbers_refuses_exactly_the_values_with_a_bad_number_and_names_the_first(value):
    bad = _bad_paths(value, "p")
    if not bad:
        check_numbers("m", {"p": value})
        return
    with pytest.raises(errors.InvalidParams) as info:
        check_numbers("m", {"p": value})
    assert f"param `{bad[0]}`" in info.value.message
    assert info.value.data["param"] == "p"


def test_the_64_bit_edges():
    check_numbers("m", {"a": INT64_MIN, "b": INT64_MAX, "c": 1.7976931348623157e308})
    for bad in (INT64_MIN - 1, INT64_MAX + 1, 2**5000, float("inf"), float("nan")):
        with pytest.raises(errors.InvalidParams):
            check_numbers("m", {"a": [bad]})


def test_a_json_literal_beyond_a_double_decodes_to_infinity_for_the_check():
    from client.protocol import decode_message

    message = decode_message(b'{"params": {"t": 1e400, "u": -1e400}}')
    assert message["params"] == {"t": math.inf, "u": -math.inf}
    assert msgspec.json.decode(b"1.5") == decode_message(b"1.5")


def test_the_status_and_action_sets_are_consistent_with_each_other():
    """The subsets and word constants agree with the full lists, and the orders that the
    metrics, the status counts and the schemas show stay as they were."""
    v = vocabulary
    assert v.JOB_STATUSES == (
        v.QUEUED, v.WAITING, v.RUNNING, v.CANCELING, v.CANCELED, v.SUCCESS, v.ERROR,
    )  # fmt: skip
    assert v.JOB_STATUSES == ("queued", "waiting", "running", "canceling", "canceled",
                              "success", "error")  # fmt: skip
    assert set(v.FINALIZED_STATUSES) <= set(v.JOB_STATUSES)
    assert set(v.ACTIVE_STATUSES) <= set(v.JOB_STATUSES) - set(v.FINALIZED_STATUSES)
    assert v.FILTER_ACTIONS == ("ACCEPT", "PAUSE", "REJECT", "CONTINUE", "RATE_LIMIT")
    assert v.WORD_FILTER_ACTIONS == ("ACCEPT", "PAUSE", "REJECT", "CONTINUE")
    assert v.MODES == ("shared", "exclusive")
    assert v.REQUEST_MODES == ("shared", "exclusive", "release")
    assert (v.INT64_MIN, v.INT64_MAX) == (-(2**63), 2**63 - 1)
