"""Drains written before the record was declared once (client.drains) still load and resume.

`tests/fixtures/drain_state_v1/` was written by wconfd and luxid at commit efe2e5c, when
wconfd kept the resume state untyped (`Drain`) and luxid declared its own `DrainRecord`
(`tests/fixtures/make_drain_state_v1.py`; the journal's preallocated zeros cut off): node
n1's drain complete (a and b moved to n3, the node with the most room), node n3's drain
(a and b moved on to n2) blocked because no node has room for big, a soft queue drain
complete with its rule still in effect.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_drains_node import follow, placed
from test_jobproc_opcodes import run as ok

from client.drains import Blocked, DrainJob, DrainRecord
from wconfd.persistence import load_durable_state, open_local_store

FIXTURE = Path(__file__).parent.parent / "fixtures" / "drain_state_v1"

pytestmark = pytest.mark.timeout(120)


def _copy(tmp_path: Path) -> Path:
    state = tmp_path / "state"
    shutil.copytree(FIXTURE, state)
    return state


def test_old_drain_records_load_as_the_one_type(tmp_path: Path) -> None:
    store = open_local_store(_copy(tmp_path))
    try:
        config = load_durable_state(store).config
    finally:
        store.close()
    drains = {d.target: d for d in config.list_objects("drain")}
    assert set(drains) == {"node/n1", "node/n3", "queue"}
    assert all(isinstance(d, DrainRecord) and d.uuid == d.target for d in drains.values())
    n1 = drains["node/n1"]
    assert n1.status == "complete" and sorted(n1.moved) == ["a", "b"] and not n1.active
    assert all(isinstance(job, DrainJob) for job in n1.done)
    assert {(job.kind, job.instance, job.status) for job in n1.done} == {
        ("drained", None, "success"), ("migrate", "a", "success"), ("migrate", "b", "success"),
    }  # fmt: skip
    assert n1.message == "v1 drain" and n1.max_parallel == 2
    assert n1.events[-1][2] == "all instances moved; drain complete"
    big = drains["node/n3"].blocked["big"]
    assert isinstance(big, Blocked) and big.reason.startswith("no node has room for big")
    assert drains["queue"].mode == "soft" and drains["queue"].filter_uuid is not None


@pytest.mark.local_store("starts the daemons on a state directory's journal and SQLite files")
def test_daemons_on_old_state_resume_the_blocked_drain(tmp_path: Path, daemon_factory: Any) -> None:
    _copy(tmp_path)
    stack = Stack(daemon_factory)
    try:
        stored = stack.wc.get_object(kind="drain", key="node/n1")
        assert msgspec.convert(stored, DrainRecord).status == "complete"
        status = {s.target: s for s in stack.lc.query_drains()}
        assert (status["node/n1"].status, status["node/n1"].total) == ("complete", 2)
        assert status["node/n3"].status == "draining"
        assert [name for name, _ in status["node/n3"].blocked] == ["big"]
        assert status["queue"].status == "complete" and status["queue"].mode == "soft"
        stack.lc.undrain_queue()  # the old soft drain's rule holds new jobs till then
        assert stack.lc.query_filters(uuids=None, fields=None) == []
        # Room appears: the drain written by the old luxid moves big by itself.
        ok(stack, {"OP_ID": "OP_NODE_ADD", "node_name": "n4"})
        done, _ = follow(stack, "node/n3", lambda s: s.status == "complete")
        assert done.remaining == 0 and done.total == 3  # a and b went before it blocked
        assert placed(stack) == {"a": "n2", "b": "n2", "big": "n4"}
    finally:
        stack.close()
