"""Thousands of malformed frames at a real daemon: it answers each sensibly and keeps serving."""

from __future__ import annotations

import json
import random

import pytest

pytestmark = pytest.mark.timeout(120)

VALID = [
    {"jsonrpc": "2.0", "method": "ping", "id": 1},
    {
        "jsonrpc": "2.0",
        "method": "identify",
        "params": {"job_id": 1, "pid": 1, "start_time": 0},
        "id": 2,
    },
    [{"jsonrpc": "2.0", "method": "version", "id": 3}],
]
JUNK_VALUES = [None, True, -1, 2**70, 1.5e308, "", "x" * 300, [], {}, [[[]]], {"a": {"b": []}}]


def mutate(rng: random.Random) -> bytes:
    """A frame derived from a valid request by breaking its bytes or its structure."""
    base = json.dumps(rng.choice(VALID)).encode()
    choice = rng.randrange(7)
    if choice == 0:  # random bytes
        return bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))).replace(b"\n", b"")
    if choice == 1:  # truncated
        return base[: rng.randrange(len(base))]
    if choice == 2:  # flipped bytes
        data = bytearray(base)
        for _ in range(rng.randrange(1, 5)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        return bytes(data).replace(b"\n", b"")
    if choice == 3:  # a member replaced by junk
        msg = json.loads(base)
        target = msg[0] if isinstance(msg, list) else msg
        target[rng.choice(["jsonrpc", "method", "params", "id", "extra"])] = rng.choice(JUNK_VALUES)
        return json.dumps(msg).encode()
    if choice == 4:  # params of the wrong shape
        msg = {
            "jsonrpc": "2.0",
            "method": rng.choice(["ping", "identify", "version", "nope"]),
            "params": rng.choice([*JUNK_VALUES, [rng.choice(JUNK_VALUES)] * 3]),
            "id": 5,
        }
        return json.dumps(msg).encode()
    if choice == 5:  # deep nesting
        depth = rng.randrange(1, 2000)
        return b"[" * depth + b"]" * depth
    return rng.choice([b"{}", b"[]", b"null", b"1", b'"s"', b"[1,2]", b"[{}]", b"\x00\x01"])


def test_fuzzed_frames_never_break_the_daemon(wconfd, raw_factory):
    rng = random.Random(1234)
    conn = raw_factory(wconfd.socket)
    answered = 0
    for i in range(3000):
        frame = mutate(rng)
        if not frame.strip():
            continue
        conn.send(frame + b"\n")
        # Each frame yields at most one line; a ping after it proves the stream is in sync.
        conn.send(
            json.dumps({"jsonrpc": "2.0", "method": "ping", "id": f"sync-{i}"}).encode() + b"\n"
        )
        while True:
            msg = json.loads(conn.line())
            if isinstance(msg, dict) and msg.get("id") == f"sync-{i}":
                assert msg["result"] == "pong"
                break
            answered += 1
            for item in msg if isinstance(msg, list) else [msg]:
                if "error" in item:
                    assert item["error"]["data"]["type"] in {
                        "ParseError",
                        "InvalidRequest",
                        "MethodNotFound",
                        "InvalidParams",
                        "IdentityMismatch",
                        "NotIdentified",
                    }, item
                    assert "Traceback" not in item["error"]["message"]
    assert answered > 1000
    assert "Traceback" not in wconfd.log()
    assert (
        raw_factory(wconfd.socket).call(b'{"jsonrpc":"2.0","method":"ping","id":0}\n')["result"]
        == "pong"
    )
