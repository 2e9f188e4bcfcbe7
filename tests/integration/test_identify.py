"""Client identification (docs/contracts.md#client-identification): SO_PEERCRED and start-time
checks through the socket."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import psutil
import pytest

from client import AsyncWConfdClient, WConfdClient, errors

pytestmark = pytest.mark.timeout(60)


def _frame(method, params, id_=1):
    return (
        json.dumps({"jsonrpc": "2.0", "method": method, "params": params, "id": id_}).encode()
        + b"\n"
    )


def test_stub_identifies_lazily_with_stable_client_id(wconfd):
    client = WConfdClient(wconfd.socket, job_id=42)
    assert client.client_id is None
    client.ping()
    start = psutil.Process().create_time()
    assert client.client_id == f"job-42:{os.getpid()}:{start:.2f}"
    # A new connection of the same process has the same identity.
    other = WConfdClient(wconfd.socket, job_id=42)
    other.ping()
    assert other.client_id == client.client_id


def test_named_client_id(wconfd):
    client = WConfdClient(wconfd.socket, name="lw-cli")
    client.ping()
    assert client.client_id.startswith(f"lw-cli:{os.getpid()}:")


def test_identify_with_another_process_pid_is_refused(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        start = psutil.Process(other.pid).create_time()
        answer = conn.call(_frame("identify", {"job_id": 1, "pid": other.pid, "start_time": start}))
        assert answer["error"]["code"] == -32001
        assert answer["error"]["data"]["type"] == "IdentityMismatch"
        assert str(other.pid) in answer["error"]["message"]
    finally:
        other.kill()
        other.wait()


def test_identify_with_wrong_start_time_is_refused(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    start = psutil.Process().create_time()
    answer = conn.call(
        _frame("identify", {"job_id": 1, "pid": os.getpid(), "start_time": start - 5})
    )
    assert answer["error"]["data"]["type"] == "IdentityMismatch"
    ok = conn.call(_frame("identify", {"job_id": 1, "pid": os.getpid(), "start_time": start + 0.5}))
    assert "result" in ok


def test_reidentify_with_other_identity_is_invalid_params(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    start = psutil.Process().create_time()
    first = conn.call(_frame("identify", {"job_id": 1, "pid": os.getpid(), "start_time": start}))
    again = conn.call(_frame("identify", {"job_id": 1, "pid": os.getpid(), "start_time": start}))
    assert again["result"] == first["result"]
    other = conn.call(_frame("identify", {"job_id": 2, "pid": os.getpid(), "start_time": start}))
    assert other["error"]["data"]["type"] == "InvalidParams"


@pytest.mark.parametrize(
    "params",
    [
        {"job_id": 0, "name": None},
        {"job_id": -3, "name": None},
        {"job_id": None, "name": "has:colon"},
        {"job_id": None, "name": ""},
    ],
)
def test_identify_rejects_bad_names(wconfd, raw_factory, params):
    conn = raw_factory(wconfd.socket)
    params = dict(params, pid=os.getpid(), start_time=psutil.Process().create_time())
    answer = conn.call(_frame("identify", params))
    assert answer["error"]["data"]["type"] == "InvalidParams"


def test_async_stub_identifies(wconfd):
    import asyncio

    async def go():
        async with AsyncWConfdClient(wconfd.socket, name="async") as client:
            pongs = await asyncio.gather(*(client.ping() for _ in range(50)))
            assert pongs == ["pong"] * 50
            assert client.client_id.startswith("async:")
            with pytest.raises(errors.IdentityMismatch):
                await client.identify(None, 1, 0.0)

    asyncio.run(go())
