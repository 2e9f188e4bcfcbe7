"""The event stream (docs/contracts.md#events) against real daemons: watch_events on both
sockets (the events of a job, a filter, the drain flag, a configuration object, locks only
while followed; waking on an event; the timeout; the topics; InvalidParams for an `after`
above the newest; `gap` under a small --event-retention), indexes that go on without a
repeat or a hole after kill -9 of each daemon, `lw events`, and `GET /2/events` resumed
with Last-Event-ID while 200 jobs run.
"""

from __future__ import annotations

import http.client
import itertools
import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from client import LuxiClient, WConfdClient, errors

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import ADMIN_LOCKS, Stack, delay, raises
from test_cli import Lw
from test_rapi import ADMIN, Rapi, write_users

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def newest(client: Any) -> int:
    """The daemon's newest index (no topic asked: only `last`)."""
    return int(client.watch_events(after=0, topics=[], timeout=0).last)


def collect(client: Any, after: int, count: int, topics: list[str] | None = None,
            timeout: float = 15) -> list[dict[str, Any]]:  # fmt: skip
    """Follow `last` until `count` events came (as JSON, what an outside client sees)."""
    out: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(out) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"only {out} after {timeout} s"
        batch = client.watch_events(after=after, topics=topics, timeout=min(left, 5))
        out += msgspec.to_builtins(batch.events)
        after = batch.last
    return out


TOPICS_ALL = ("job", "drain", "filter", "budget", "queue", "lock", "config", "role")
# Every topic but `lock`: asking for `lock` would make wconfd produce lock events.
NOT_LOCK = [t for t in TOPICS_ALL if t != "lock"]


def all_events(client: Any, topics: list[str] | None = None) -> list[dict[str, Any]]:
    """Every kept event of `topics` (default: all but lock)."""
    batch = client.watch_events(after=0, topics=topics or NOT_LOCK, timeout=0, limit=10000)
    return msgspec.to_builtins(batch.events)


# -- luxid ------------------------------------------------------------------------------------


@pytest.mark.local_store("indexes grow by exactly one only on local files")
def test_a_jobs_status_changes_are_events_from_submit_to_the_end(stack):
    after = newest(stack.lc)
    job = stack.submit(delay())
    assert stack.wait_final(job) == "success"
    events = [e for e in collect(stack.lc, after, 1, ["job"]) if e["key"] == f"job/{job}"]
    first = events[0]
    assert first["index"] == after + 1
    assert {k: first[k] for k in ("daemon", "topic", "action", "key")} == {
        "daemon": "luxid", "topic": "job", "action": "status", "key": f"job/{job}",
    }  # fmt: skip
    assert first["data"] == {"status": "queued", "opcode": "OP_TEST_DELAY", "pending_reason": None}
    mine = [e["data"] for e in all_events(stack.lc, ["job"]) if e["key"] == f"job/{job}"]
    assert mine[0]["status"] == "queued" and mine[-1]["status"] == "success"
    assert "running" in [d["status"] for d in mine]
    pairs = [(d["status"], d["pending_reason"]) for d in mine]
    assert all(a != b for a, b in itertools.pairwise(pairs)), "an event without a change"


def test_filters_the_drain_flag_and_a_held_jobs_reason(stack):
    after = newest(stack.lc)
    uuid = stack.lc.replace_filter(uuid=None, priority=0, predicates=[], action="PAUSE", reason=[])
    held = stack.submit(delay())
    stack.lc.set_drain_flag(flag=True)
    stack.lc.set_drain_flag(flag=False)
    stack.lc.delete_filter(uuid=uuid)
    assert stack.wait_final(held) == "success"
    events = collect(stack.lc, after, 4, ["filter", "queue"])
    assert [(e["topic"], e["action"], e["key"]) for e in events] == [
        ("filter", "add", f"filter/{uuid}"),
        ("queue", "drain_flag", "queue"),
        ("queue", "drain_flag", "queue"),
        ("filter", "remove", f"filter/{uuid}"),
    ]
    assert [e["data"]["drained"] for e in events if e["topic"] == "queue"] == [True, False]
    job_events = [e for e in all_events(stack.lc, ["job"]) if e["key"] == f"job/{held}"]
    assert job_events[0]["data"]["pending_reason"] == f"paused by filter {uuid}"


def test_watch_events_wakes_on_an_event_and_times_out_without(stack):
    after = newest(stack.lc)
    started = time.monotonic()
    quiet = stack.lc.watch_events(after=after, timeout=0.3)
    assert quiet.events == [] and quiet.last == after and not quiet.gap
    assert time.monotonic() - started >= 0.29
    answers: list[Any] = []

    def watch() -> None:
        with LuxiClient(stack.luxid.socket) as lc:
            answers.append((lc.watch_events(after=after, timeout=20), time.monotonic()))

    waiter = threading.Thread(target=watch)
    waiter.start()
    time.sleep(0.3)
    submitted = time.monotonic()
    stack.lc.set_drain_flag(flag=True)
    waiter.join(10)
    ((batch, woke),) = answers
    assert batch.events and batch.events[0].key == "queue"
    assert woke - submitted < 2.0, "the waiter was not woken by the event"
    stack.lc.set_drain_flag(flag=False)


def test_after_above_the_newest_is_invalid_params(stack):
    for client in (stack.lc, stack.wc):
        top = newest(client)
        exc = raises(errors.InvalidParams, client.watch_events, after=top + 1, timeout=0)
        assert "above the newest event index" in exc.message
        raises(errors.InvalidParams, client.watch_events, after=0, topics=["nope"], timeout=0)


# -- wconfd -----------------------------------------------------------------------------------


def test_wconfd_config_events_and_lock_events_only_while_followed(stack):
    after = newest(stack.wc)
    stack.add_nodes("n1")
    events = collect(stack.wc, after, 1, ["config"])
    node = next(e for e in events if e["key"] == "node/n1")
    assert (node["daemon"], node["topic"], node["action"], node["data"]["serial"]) == (
        "wconfd", "config", "add", 1,
    )  # fmt: skip
    # Nobody follows `lock`: taking and freeing a lock writes no event.
    quiet = newest(stack.wc)
    with WConfdClient(stack.wconfd.socket, name="locker") as wc:
        wc.try_update_locks([["node/n1", "exclusive"]])
        wc.free_locks()
    assert newest(stack.wc) == quiet
    # Now someone follows it: the grant, the wait and the releases are events.
    stack.wc.watch_events(after=quiet, topics=["lock"], timeout=0.01)
    with WConfdClient(stack.wconfd.socket, name="locker") as one, \
            WConfdClient(stack.wconfd.socket, name="waiter") as two:  # fmt: skip
        one.try_update_locks([["node/n1", "exclusive"]])
        waiting = threading.Thread(
            target=lambda: two.update_locks_waiting([["node/n1", "shared"]], timeout=10)
        )
        waiting.start()
        events = collect(stack.wc, quiet, 2, ["lock"])
        one.free_locks()
        waiting.join(10)
        more = collect(stack.wc, events[-1]["index"], 2, ["lock"])
        two.free_locks()
    seen = [(e["action"], e["key"], e["data"]["mode"]) for e in events + more]
    assert seen[:4] == [
        ("granted", "node/n1", "exclusive"),
        ("waiting", "node/n1", "shared"),
        ("released", "node/n1", "exclusive"),
        ("granted", "node/n1", "shared"),
    ]
    owners = [e["data"]["owner"] for e in events + more]
    assert owners[0] == owners[2] != owners[1] == owners[3]


@pytest.mark.local_store("indexes grow by exactly one only on local files")
def test_gap_with_a_small_retention_on_both_daemons(daemon_factory):
    wconfd = daemon_factory("wconfd", "--event-retention", "3").start()
    luxid = daemon_factory("luxid", "--event-retention", "3").start()
    with LuxiClient(luxid.socket) as lc, WConfdClient(wconfd.socket, name="t") as wc:
        for flag in (True, False) * 4:
            lc.set_drain_flag(flag=flag)
        wc.update_locks_waiting(ADMIN_LOCKS, timeout=10)
        for name in ("a", "b", "c", "d", "e"):
            wc.add_object("node", {"name": name})
        for client in (lc, wc):
            batch = client.watch_events(after=0, topics=NOT_LOCK, timeout=0)
            assert batch.gap and len(batch.events) == 3
            assert [e.index for e in batch.events] == list(range(batch.last - 2, batch.last + 1))
            tail = client.watch_events(after=batch.last - 3, topics=NOT_LOCK, timeout=0)
            assert not tail.gap and len(tail.events) == 3


# -- restarts ---------------------------------------------------------------------------------


def indexes(client: Any) -> list[int]:
    return [e["index"] for e in all_events(client)]


@pytest.mark.local_store("indexes grow by exactly one only on local files")
@pytest.mark.parametrize("daemon", ["luxid", "wconfd"])
def test_indexes_go_on_without_repeat_or_hole_after_kill9(stack, daemon):
    client = stack.lc if daemon == "luxid" else stack.wc
    stack.add_nodes("n1", "n2")
    job = stack.submit(delay())
    assert stack.wait_final(job) == "success"
    before = indexes(client)
    assert before == list(range(before[0], before[-1] + 1))
    if daemon == "luxid":
        stack.restart_luxid(kill=True)
        client = stack.lc = LuxiClient(stack.luxid.socket, timeout=30)
    else:
        stack.restart_wconfd(kill=True)
        client = stack.wc = WConfdClient(stack.wconfd.socket, name="test-admin")
    stack.add_nodes("n3")
    job = stack.submit(delay())
    assert stack.wait_final(job) == "success"
    after = indexes(client)
    assert after[: len(before)] == before, "kept events changed across the restart"
    assert after == list(range(after[0], after[-1] + 1)), "an index was skipped or repeated"
    assert len(after) > len(before)
    restarted = [e for e in all_events(client) if e["index"] > before[-1]]
    assert restarted[0]["topic"] == "role" and restarted[0]["action"] == "master"


# -- lw events --------------------------------------------------------------------------------


def test_lw_events_prints_one_a_line_and_json(stack):
    stack.add_nodes("n1")
    job = stack.submit(delay())
    assert stack.wait_final(job) == "success"
    lw = Lw(stack.luxid.run_dir, stack.luxid.state_dir)
    text = lw.ok("events")
    assert any(f" luxid job status job/{job} " in line for line in text.splitlines())
    assert any(" wconfd config add node/n1 " in line for line in text.splitlines())
    lines = lw.ok("events", "--json", "--topics", "job", "--since", "1h").splitlines()
    parsed = [json.loads(line) for line in lines]
    assert parsed and {e["topic"] for e in parsed} == {"job"}
    assert set(parsed[0]) == {"index", "ts", "daemon", "topic", "action", "key", "data"}
    assert lw.ok("events", "--since", "0s") == ""
    assert "unknown topic" in lw.fails(2, "events", "--topics", "jobs")


# -- the SSE stream ---------------------------------------------------------------------------


class Sse:
    """A raw SSE reader on lw-rapi's /2/events."""

    def __init__(self, rapi: Rapi, last_id: str | None = None, topics: str = "") -> None:
        import base64

        self.conn = http.client.HTTPConnection("127.0.0.1", rapi.port, timeout=30)
        token = base64.b64encode(f"{ADMIN[0]}:{ADMIN[1]}".encode()).decode()
        headers = {"Authorization": f"Basic {token}"}
        if last_id is not None:
            headers["Last-Event-ID"] = last_id
        self.conn.request("GET", "/2/events" + (f"?topics={topics}" if topics else ""),
                          headers=headers)  # fmt: skip
        self.resp = self.conn.getresponse()
        assert self.resp.status == 200, self.resp.read()
        assert self.resp.headers["Content-Type"].startswith("text/event-stream")

    def next(self) -> dict[str, str]:
        """The next frame (comments skipped)."""
        fields: dict[str, str] = {}
        while True:
            line = self.resp.readline().decode()
            assert line, "the stream ended"
            line = line.rstrip("\n")
            if not line:
                if fields:
                    return fields
                continue
            if line.startswith(":"):
                continue
            name, _, value = line.partition(": ")
            fields[name] = value

    def close(self) -> None:
        self.conn.close()


@pytest.mark.slow
@pytest.mark.timeout(240)
def test_sse_resumes_with_last_event_id_exactly_once_while_200_jobs_run(stack, daemon_factory):
    write_users(stack.wconfd.state_dir, (*ADMIN, True))
    rapi = Rapi(daemon_factory)
    assert rapi.call("GET", "/2/events", user=None).status == 401
    start = (newest(stack.lc), newest(stack.wc))
    first = Sse(rapi, f"{start[0]}-{start[1]}")
    jobs = stack.lc.submit_many_jobs(jobs=[[delay()] for _ in range(200)])
    ids = [job_id for ok, job_id in jobs if ok]
    got = [first.next() for _ in range(150)]  # then drop the connection mid-stream
    first.close()
    second = Sse(rapi, got[-1]["id"])
    for job_id in ids:
        stack.wait_final(job_id, timeout=60)
    # A status shows in queries at once, its event in the next step (at most 40 ms on).
    succeeded = {f"job/{i}" for i in ids}
    stack.until(
        lambda: (
            succeeded
            <= {e["key"] for e in all_events(stack.lc, ["job"]) if e["data"]["status"] == "success"}
        )
    )
    want = {("luxid", e["index"]) for e in all_events(stack.lc) if e["index"] > start[0]}
    want |= {("wconfd", e["index"]) for e in all_events(stack.wc) if e["index"] > start[1]}
    while len(got) < len(want):
        got.append(second.next())
    second.close()
    seen = [(json.loads(f["data"])["daemon"], json.loads(f["data"])["index"]) for f in got]
    assert all(f["event"] != "gap" for f in got)
    assert len(seen) == len(set(seen)), "an event came twice"
    assert set(seen) == want, "an event was lost"
    finals = {json.loads(f["data"])["key"] for f in got
              if f["event"] == "job" and json.loads(f["data"])["data"]["status"] == "success"}  # fmt: skip
    assert finals == {f"job/{i}" for i in ids}


def test_sse_starts_now_without_last_event_id_and_says_gap(stack, daemon_factory):
    write_users(stack.wconfd.state_dir, (*ADMIN, True))
    rapi = Rapi(daemon_factory)
    old = stack.submit(delay())
    stack.wait_final(old)
    stream = Sse(rapi, topics="queue")
    stack.lc.set_drain_flag(flag=True)
    frame = stream.next()
    assert frame["event"] == "queue"
    assert json.loads(frame["data"])["action"] == "drain_flag"
    stream.close()
    stack.lc.set_drain_flag(flag=False)
    beyond = Sse(rapi, f"{newest(stack.lc) + 100}-0", topics="queue")
    assert beyond.next()["event"] == "gap"
    beyond.close()
    assert rapi.call("GET", "/2/events?topics=nope").status == 400
    assert rapi.call("GET", "/2/events", headers={"Last-Event-ID": "junk"}).status == 400
