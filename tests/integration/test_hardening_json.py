"""JSON is strict everywhere (docs/contracts.md#framing): a duplicate key is InvalidRequest
on the sockets (answered with id null, the connection stays open) and 400 on the RAPI; a
message or body nested deeper than the limit is InvalidRequest / 400, never 500; 100
levels are always read.  A frame of the 16 MiB limit is read off the event loop, so a
ping on another connection is answered meanwhile."""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_rapi import ADMIN, Rapi, write_users

pytestmark = pytest.mark.timeout(120)

DUPLICATE = b'{"jsonrpc":"2.0","method":"change_job_priority","params":{"job_id":1,"priority":0,"priority":-5},"id":7}\n'


def nested(depth: int) -> bytes:
    return b"[" * depth + b"]" * depth


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    write_users(s.wconfd.state_dir, (*ADMIN, True))
    yield s
    s.close()


def test_duplicate_keys_and_deep_nesting_on_both_sockets(stack, raw_factory):
    for sock in (stack.luxid.socket, stack.wconfd.socket):
        conn = raw_factory(sock)
        answer = conn.call(DUPLICATE)
        assert answer["id"] is None
        assert answer["error"]["data"]["type"] == "InvalidRequest"
        assert "same key twice" in answer["error"]["message"]
        for depth in (1001, 100_000):
            frame = (
                b'{"jsonrpc":"2.0","method":"ping","params":{"x":' + nested(depth) + b'},"id":1}\n'
            )
            answer = conn.call(frame)
            assert answer["error"]["data"]["type"] == "InvalidRequest", depth
            assert "nested deeper" in answer["error"]["message"]
        # 100 levels are read: ping says its params are wrong, not the message.
        frame = b'{"jsonrpc":"2.0","method":"ping","params":{"x":' + nested(100) + b'},"id":2}\n'
        assert conn.call(frame)["error"]["data"]["type"] == "InvalidParams"
        # The connection stayed open.
        assert conn.call(b'{"jsonrpc":"2.0","method":"ping","id":3}\n')["result"] == "pong"


def test_duplicate_keys_and_deep_bodies_on_the_rapi(stack, daemon_factory):
    rapi = Rapi(daemon_factory)
    body = b'{"priority": -5, "priority": 0, "predicates": [], "action": "ACCEPT"}'
    answer = rapi.call("POST", "/2/filters", raw=body)
    assert answer.status == 400, answer
    assert "same key twice" in answer.body["explain"]
    for depth in (1001, 100_000):
        answer = rapi.call("POST", "/2/filters", raw=nested(depth))
        assert answer.status == 400, answer
        assert "nested deeper" in answer.body["explain"]
    assert stack.lc.query_filters(uuids=None) == []
    assert "Traceback" not in rapi.daemon.log()
    # A body with each key once is read as before.
    ok = {"priority": 0, "predicates": [], "action": "ACCEPT"}
    assert rapi.call("POST", "/2/filters", raw=json.dumps(ok).encode()).status == 200


LIMIT = 16 * 1024 * 1024


def frame_of(size: int) -> bytes:
    """A ping request whose params hold millions of numbers (the costliest shape to read),
    exactly `size` bytes long without its newline."""
    head, tail = b'{"jsonrpc":"2.0","method":"ping","params":{"pad":[', b']},"id":9}'
    count = (size - len(head) - len(tail)) // 2
    body = head + b",".join([b"7"] * count) + tail
    return body[:-1] + b" " * (size - len(body)) + b"}\n"


@pytest.mark.slow
def test_a_big_frame_does_not_stall_a_ping_on_another_connection(wconfd, raw_factory):
    """A frame of exactly the limit is read (the ping it carries has a param too many),
    decoded and checked off the event loop: pings on another connection keep being answered
    meanwhile (50 ms on an idle machine, bench/big_frame.py; a busy test machine gets more).
    One byte more is InvalidRequest and closes the connection."""
    big = raw_factory(wconfd.socket)
    big.sock.settimeout(90)  # reading and checking 16 MiB takes seconds on a busy machine
    pinger = raw_factory(wconfd.socket)
    answers: list[object] = []
    sender = threading.Thread(target=lambda: answers.append(big.call(frame_of(LIMIT))))
    sender.start()
    slowest = 0.0
    while sender.is_alive():
        start = time.perf_counter()
        assert pinger.call(b'{"jsonrpc":"2.0","method":"ping","id":1}\n')["result"] == "pong"
        slowest = max(slowest, time.perf_counter() - start)
    sender.join()
    assert answers[0]["error"]["data"]["type"] == "InvalidParams", answers  # type: ignore[index]
    assert slowest < 1.0, f"a ping waited {slowest:.3f} s beside the big frame"
    answer = big.call(frame_of(LIMIT + 1))
    assert answer["error"]["data"]["type"] == "InvalidRequest"
    assert str(LIMIT) in answer["error"]["message"]
    assert big.closed_by_peer()
