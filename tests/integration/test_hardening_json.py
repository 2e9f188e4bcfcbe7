"""JSON is strict everywhere (docs/contracts.md#framing): a duplicate key is InvalidRequest
on the sockets (answered with id null, the connection stays open) and 400 on the RAPI; a
message or body nested deeper than the limit is InvalidRequest / 400, never 500; 100
levels are always read."""

from __future__ import annotations

import json
import sys
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
