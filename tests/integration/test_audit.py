"""The audit log (docs/contracts.md#audit-log) through the real daemons: every audited
call leaves one entry naming its actor, peer uid/pid, target, outcome and serials; the
entries survive kill -9 of each daemon; query_audit filters exactly; a job process's own
calls name its job."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from luxid_testlib import Stack, delay

from client import LuxiClient, WConfdClient, errors


@pytest.fixture
def stack(daemon_factory: Any) -> Any:
    s = Stack(daemon_factory)
    yield s
    s.close()


def entries(client: Any, **query: Any) -> list[dict[str, Any]]:
    """query_audit's answer as plain dicts (as an outside test compares them)."""
    import msgspec

    return [msgspec.to_builtins(e) for e in client.query_audit(**query)]


def without_volatile(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in entry.items() if k not in ("seq", "ts")}


def test_object_writes_record_actor_peer_target_serials_and_outcome(stack: Stack) -> None:
    me = {"uid": os.getuid(), "pid": os.getpid(), "job_id": None, "daemon": "wconfd"}
    with stack.admin() as wc:
        added = wc.add_object("node", {"name": "n7"}, actor="cli:alice")
        updated = dict(added, vm_capable=False)
        wc.update_object("node", updated)
        with pytest.raises(errors.StaleObjectError):  # the serial moved on
            wc.update_object("node", dict(added, offline=True), actor="cli:alice")
        wc.remove_object("node", "n7", actor="cli:alice")
    found = [without_volatile(e) for e in entries(stack.wc, target="node/n7")]
    assert found == [
        {**me, "actor": "cli:alice", "method": "add_object", "target": "node/n7",
         "outcome": "ok", "serial": [None, 1]},
        {**me, "actor": f"uid:{os.getuid()}", "method": "update_object", "target": "node/n7",
         "outcome": "ok", "serial": [1, 2]},
        {**me, "actor": "cli:alice", "method": "update_object", "target": "node/n7",
         "outcome": "StaleObjectError"},
        {**me, "actor": "cli:alice", "method": "remove_object", "target": "node/n7",
         "outcome": "ok", "serial": [2, None]},
    ]  # fmt: skip
    seqs = [e["seq"] for e in entries(stack.wc)]
    assert seqs == sorted(set(seqs))


def test_luxid_calls_record_jobs_and_luxid_writes_carry_the_callers_actor(stack: Stack) -> None:
    with LuxiClient(stack.luxid.socket, actor="rapi:bob") as lc:
        job = lc.submit_job(ops=[delay(0)])
        outcomes = lc.submit_many_jobs(jobs=[[delay(0)], [{"OP_ID": "OP_NO_SUCH"}]])
        with pytest.raises(errors.NotFound):
            lc.cancel_job(job_id=999_999)
        uuid = lc.replace_filter(uuid=None, priority=5, predicates=[], action="ACCEPT", reason=[])
        lc.set_drain_flag(flag=False)
    stack.wait_final(job)
    found = [
        (e["method"], e["target"], e["outcome"], e["actor"])
        for e in entries(stack.lc, actor="rapi:bob")
    ]
    assert found == [
        ("submit_job", f"job/{job}", "ok", "rapi:bob"),
        ("submit_many_jobs", f"job/{outcomes[0][1]}", "ok", "rapi:bob"),
        ("submit_many_jobs", "queue", "InvalidOpcode", "rapi:bob"),
        ("cancel_job", "job/999999", "NotFound", "rapi:bob"),
        ("replace_filter", f"filter/{uuid}", "ok", "rapi:bob"),
        ("set_drain_flag", "queue", "ok", "rapi:bob"),
    ]
    # luxid wrote the rule into wconfd's configuration for bob: wconfd names him too.
    (written,) = entries(stack.wc, target=f"filter/{uuid}")
    assert (written["method"], written["actor"], written["serial"]) == (
        "add_object",
        "rapi:bob",
        [None, 1],
    )
    assert written["uid"] == os.getuid() and written["pid"] == stack.luxid.pid


def test_entries_survive_kill9_and_queries_filter_exactly(stack: Stack) -> None:
    with WConfdClient(stack.wconfd.socket, name="t", actor="cli:carol") as wc:
        wc.cleanup_dead_clients()
    before = time.time()
    job = LuxiClient(stack.luxid.socket, actor="cli:carol").submit_job(ops=[delay(0)])
    stack.wait_final(job)
    stack.restart_wconfd(kill=True)
    stack.restart_luxid(kill=True)
    with WConfdClient(stack.wconfd.socket, name="t") as wc:
        (cleanup,) = entries(wc, actor="cli:carol")
        assert (cleanup["method"], cleanup["target"]) == ("cleanup_dead_clients", "clients")
        assert entries(wc, actor="cli:carol", until=before) == [cleanup]
        assert entries(wc, actor="cli:carol", since=before) == []
    with LuxiClient(stack.luxid.socket) as lc:
        (submitted,) = entries(lc, target=f"job/{job}")
        assert submitted["actor"] == "cli:carol" and submitted["ts"] >= before
        assert entries(lc, limit=1)[-1]["seq"] == max(e["seq"] for e in entries(lc))
        assert entries(lc, limit=0) == []
        with pytest.raises(errors.InvalidParams):
            lc.query_audit(limit=-1)


def test_a_job_process_is_named_by_its_job(stack: Stack) -> None:
    stack.add_nodes("n7")
    job = stack.submit({"OP_ID": "OP_NODE_SET_PARAMS", "node_name": "n7", "drained": True})
    assert stack.wait_final(job) == "success"
    (write,) = [e for e in entries(stack.wc, target="node/n7") if e["method"] == "update_object"]
    assert (write["actor"], write["job_id"]) == (f"job:{job}", job)
    assert write["pid"] != os.getpid()


def test_an_actor_longer_than_128_characters_is_refused_before_anything(stack: Stack) -> None:
    with pytest.raises(errors.InvalidParams, match="actor"):
        stack.lc.set_drain_flag(flag=False, actor="x" * 129)
    assert entries(stack.lc, target="queue") == []


def test_retention_drops_entries_older_than_its_days(daemon_factory: Any) -> None:
    keep = ("--audit-retention", "0.00002")  # 1.7 s
    wconfd = daemon_factory("wconfd", *keep).start()
    luxid = daemon_factory("luxid", *keep).start()
    with WConfdClient(wconfd.socket, name="t") as wc, LuxiClient(luxid.socket) as lc:
        wc.cleanup_dead_clients(actor="cli:old")
        lc.set_drain_flag(flag=False, actor="cli:old")
        assert len(entries(wc, actor="cli:old")) == len(entries(lc, actor="cli:old")) == 1
        old = time.time()
    Stack.until(lambda: time.time() > old + 2, timeout=5, step=0.1)  # the entries age
    wconfd.stop()
    luxid.stop()
    wconfd.start()
    luxid.start()
    with WConfdClient(wconfd.socket, name="t") as wc, LuxiClient(luxid.socket) as lc:
        wc.cleanup_dead_clients(actor="cli:new")  # wconfd applies retention as it records
        # (on etcd at its start as master, after recording that failover)
        Stack.until(lambda: [e["actor"] for e in entries(wc) if e["method"] != "failover"]
                    == ["cli:new"])  # fmt: skip
        Stack.until(lambda: entries(lc, actor="cli:old") == [])  # luxid at its start
