"""follow_events (docs/contracts.md#following-events) against real daemons: a follower gets
every event once, in order, exactly what watch_events reads; a follower that stops
reading is caught up once it reads again (with `gap` when its events were dropped
meanwhile) while the daemon answers everyone else; the lock topic; the asyncio stub; the
errors, and the connection closed when the daemon stops.
"""

from __future__ import annotations

import asyncio
import json
import queue
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from client import AsyncWConfdClient, LuxiClient, WConfdClient, errors
from client.follow import Following

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import ADMIN_LOCKS, Stack, delay, raises
from test_cli import LW
from test_events import NOT_LOCK, newest

pytestmark = pytest.mark.timeout(120)

PAUSE = {"priority": 0, "predicates": [], "action": "PAUSE", "reason": [["test", "hold", 1]]}


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def kept(client: Any, after: int, topics: list[str]) -> list[dict[str, Any]]:
    """Every kept event after `after`, read with watch_events (the reference)."""
    out: list[dict[str, Any]] = []
    while True:
        batch = client.watch_events(after=after, topics=topics, timeout=0, limit=10000)
        if not batch.events:
            return out
        out += msgspec.to_builtins(batch.events)
        after = batch.last


def read_until(follow: Following, last: int, timeout: float = 30) -> list[Any]:
    """The batches a follower is pushed until one reaches index `last` (the follow is
    closed from here if that takes longer than `timeout`, failing the test)."""
    batches: list[Any] = []
    timer = threading.Timer(timeout, follow.close)
    timer.start()
    try:
        for batch in follow:
            batches.append(batch)
            if batch.last >= last:
                return batches
    except errors.ConnectionError:
        raise AssertionError(f"not at {last} within {timeout} s: {batches[-1:]}") from None
    finally:
        timer.cancel()
    raise AssertionError("the follow ended")


def submit_held(lc: LuxiClient, count: int) -> None:
    """`count` jobs, held queued by a PAUSE rule (each submit is an event)."""
    for start in range(0, count, 500):
        lc.submit_many_jobs(jobs=[[delay(0)] for _ in range(min(500, count - start))])


def test_every_event_once_in_order_as_watch_events_reads_them(stack):
    start = newest(stack.lc)
    with stack.lc.follow_events(after=start, topics=NOT_LOCK) as follow:
        first = next(follow)
        assert (first.events, first.last, first.gap) == ([], start, False)
        stack.lc.replace_filter(uuid=None, **PAUSE)
        submit_held(stack.lc, 300)
        for flag in (True, False):
            stack.lc.set_drain_flag(flag=flag)
        expected = kept(stack.lc, start, NOT_LOCK)
        batches = read_until(follow, expected[-1]["index"])
    got = [event for batch in batches for event in msgspec.to_builtins(batch.events)]
    assert got == expected
    cursor = start
    for batch in batches:  # each batch begins after the last one and says where it ends
        assert batch.events and batch.events[0].index > cursor and not batch.gap
        assert batch.last == batch.events[-1].index
        cursor = batch.last


def test_a_stalled_follower_catches_up_while_the_daemon_answers_others(stack):
    start = newest(stack.lc)
    stack.lc.replace_filter(uuid=None, **PAUSE)
    with stack.lc.follow_events(after=start, topics=["job"], limit=100) as follow:
        next(follow)
        submit_held(stack.lc, 3000)  # far more than a socket's buffers hold: not read yet
        began = time.monotonic()
        stack.lc.ping()
        assert time.monotonic() - began < 1.0
        expected = kept(stack.lc, start, ["job"])
        batches = read_until(follow, expected[-1]["index"])
    assert [e for b in batches for e in msgspec.to_builtins(b.events)] == expected
    assert max(len(b.events) for b in batches) == 100


def test_a_follower_behind_the_kept_events_is_told_gap(daemon_factory):
    daemon_factory("wconfd").start()
    luxid = daemon_factory("luxid", "--event-retention", "50").start()
    with LuxiClient(luxid.socket) as lc:
        lc.replace_filter(uuid=None, **PAUSE)
        start = newest(lc)
        with lc.follow_events(after=start, topics=["job"], limit=20) as follow:
            next(follow)
            submit_held(lc, 3000)  # the pushes stop on full buffers; the kept events move on
            end = newest(lc)
            batches = read_until(follow, end)
    assert any(batch.gap for batch in batches)
    indexes = [event.index for batch in batches for event in batch.events]
    assert indexes == sorted(set(indexes)) and indexes[-1] == end


def test_lock_events_while_a_follower_asks_for_them(stack):
    wc = stack.wc
    start = newest(wc)
    with WConfdClient(stack.wconfd.socket).follow_events(after=start, topics=["lock"]) as follow:
        next(follow)
        wc.update_locks_waiting(ADMIN_LOCKS, timeout=10)
        batches = read_until(follow, newest(wc))
        wc.free_locks()
    granted = [e for b in batches for e in b.events if e.action == "granted"]
    assert {e.key for e in granted} >= {lock for lock, _ in ADMIN_LOCKS}


def test_the_asyncio_stub_follows_config_changes(stack):
    stack.wc.update_locks_waiting(ADMIN_LOCKS, timeout=10)

    async def follow() -> list[str]:
        keys: list[str] = []
        async with AsyncWConfdClient(stack.wconfd.socket) as wc:
            start = (await wc.watch_events(after=0, topics=[], timeout=0)).last
            async with wc.follow_events(after=start, topics=["config"]) as following:
                async for batch in following:
                    keys += [event.key for event in batch.events]
                    if keys:
                        return keys
                    await asyncio.to_thread(stack.wc.add_object, "node", {"name": "f1"})
        return keys

    assert asyncio.run(asyncio.wait_for(follow(), 30)) == ["node/f1"]


def test_errors_say_what_to_do(stack, raw_factory):
    raises(errors.InvalidParams, stack.lc.follow_events(after=10**9).__next__)
    conn = raw_factory(stack.luxid.socket)

    def call(params: dict[str, Any], ident: int) -> dict[str, Any]:
        frame = {"jsonrpc": "2.0", "method": "follow_events", "params": params, "id": ident}
        answer = conn.call(json.dumps(frame).encode() + b"\n")
        assert isinstance(answer, dict) and answer["id"] == ident
        return answer

    assert call({"after": 0, "topics": ["nope"]}, 1)["error"]["data"]["type"] == "InvalidParams"
    assert "result" in call({"after": 0, "topics": []}, 2)
    second = call({"after": 0}, 3)["error"]
    assert second["data"]["type"] == "InvalidParams" and "another connection" in second["message"]


def test_the_connection_closes_when_the_daemon_stops(stack):
    follow = stack.lc.follow_events(after=newest(stack.lc))
    next(follow)
    stack.luxid.stop()
    with pytest.raises(errors.ConnectionError, match="follow again from the last"):
        next(follow)
    follow.close()
    stack.luxid.start()


def test_lw_events_follow_prints_new_events_and_follows_across_a_restart(stack):
    command = [LW, "--run-dir", str(stack.luxid.run_dir), "--state-dir",
               str(stack.luxid.state_dir), "events", "--follow", "--json", "--topics", "queue"]  # fmt: skip
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in proc.stdout], daemon=True).start()  # type: ignore[union-attr]

    def next_drain_flag() -> bool:
        event = json.loads(lines.get(timeout=20))
        assert event["topic"] == "queue" and event["action"] == "drain_flag"
        return bool(event["data"]["drained"])

    try:
        stack.lc.set_drain_flag(flag=True)
        assert next_drain_flag() is True
        stack.restart_luxid()
        stack.lc.set_drain_flag(flag=False)
        assert next_drain_flag() is False
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=10)
    assert "Traceback" not in err
