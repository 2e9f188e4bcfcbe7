"""A large result leaves the cyclic garbage collector no debt: its containers, made with
the collector paused, are moved into the oldest generation, so the caller's next
allocation does not set off a collection that walks the whole result and frees nothing;
and objects the caller keeps frozen (`gc.freeze`) stay frozen.

Each check runs in a fresh interpreter: the collector's generations are the process's,
and other tests (daemons run in-process) freeze objects."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

CHECK = textwrap.dedent(
    """
    import gc, json, sys
    from typing import Any
    import msgspec
    from client import stubs

    doc = {f"i{i}": {"uuid": str(i), "disks": [{"size": i}]} for i in range(20_000)}
    raw = msgspec.Raw(msgspec.json.encode(doc))
    del doc
    gc.collect()
    if sys.argv[1] == "frozen":
        gc.freeze()
    frozen = gc.get_freeze_count()
    result = stubs._decode(msgspec.json.Decoder(Any), raw)
    young = gc.get_count()[0]
    print(json.dumps({
        "young": young,
        "threshold": gc.get_threshold()[0],
        "frozen_before": frozen,
        "frozen_after": gc.get_freeze_count(),
        "entries": len(result),
        "in_oldest": any(obj is result for obj in gc.get_objects(generation=2)),
    }))
    """
)


def run_check(mode: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-c", CHECK, mode], capture_output=True, text=True, check=True
    )
    found: dict[str, Any] = json.loads(done.stdout)
    return found


def test_a_large_result_leaves_the_youngest_generation_under_its_threshold() -> None:
    found = run_check("plain")
    if found["frozen_before"]:
        pytest.skip(
            f"this interpreter starts with {found['frozen_before']} objects frozen (3.12"
            " does), so the stub rightly leaves the collector's generations alone"
        )
    assert found["entries"] == 20_000
    assert found["young"] < found["threshold"]  # 60,000 containers were made
    assert found["in_oldest"]


def test_objects_the_caller_froze_stay_frozen() -> None:
    found = run_check("frozen")
    assert found["entries"] == 20_000
    assert found["frozen_before"] > 0
    assert found["frozen_after"] == found["frozen_before"]
