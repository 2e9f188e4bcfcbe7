"""A large result leaves the cyclic garbage collector no debt: its containers, made with
the collector paused, are moved into the oldest generation, so the caller's next
allocation does not set off a collection that walks the whole result and frees nothing;
and objects the caller keeps frozen (`gc.freeze`) stay frozen."""

from __future__ import annotations

import gc
from typing import Any

import msgspec

from client import stubs

INSTANCES = 20_000


def large_result() -> msgspec.Raw:
    """A result shaped like get_config's instances: three containers per entry."""
    doc = {f"i{i}": {"uuid": str(i), "disks": [{"size": i}]} for i in range(INSTANCES)}
    return msgspec.Raw(msgspec.json.encode(doc))


def test_a_large_result_leaves_the_youngest_generation_under_its_threshold() -> None:
    raw = large_result()
    assert gc.isenabled()
    result = stubs._decode(msgspec.json.Decoder(Any), raw)
    young = gc.get_count()[0]
    assert young < gc.get_threshold()[0]  # 60,000 containers were made
    assert len(result) == INSTANCES
    assert any(obj is result for obj in gc.get_objects(generation=2))


def test_objects_the_caller_froze_stay_frozen() -> None:
    raw = large_result()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        assert frozen > 0
        result = stubs._decode(msgspec.json.Decoder(Any), raw)
        assert gc.get_freeze_count() == frozen
        assert len(result) == INSTANCES
    finally:
        gc.unfreeze()
