"""A third-party JSON-RPC client (jsonrpcclient) talks to the daemon unchanged."""

from __future__ import annotations

import json
import os
import socket

import psutil
from jsonrpcclient import Error, Ok, parse, request


def _roundtrip(path, message) -> object:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(path))
        sock.sendall(json.dumps(message).encode() + b"\n")
        data = b""
        while not data.endswith(b"\n"):
            data += sock.recv(65536)
        return parse(json.loads(data))


def test_jsonrpcclient_ping_and_error(wconfd):
    result = _roundtrip(wconfd.socket, request("ping"))
    assert isinstance(result, Ok) and result.result == "pong"
    result = _roundtrip(
        wconfd.socket,
        request(
            "identify",
            params={"job_id": 3, "pid": os.getpid(), "start_time": psutil.Process().create_time()},
        ),
    )
    assert isinstance(result, Ok) and result.result["client_id"].startswith("job-3:")
    err = _roundtrip(wconfd.socket, request("no_such_method"))
    assert isinstance(err, Error) and err.code == -32601 and err.data["type"] == "MethodNotFound"
