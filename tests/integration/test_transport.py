"""The wire protocol (docs/contracts.md#wire-protocol) through a real daemon's socket: framing,
errors, batches."""

from __future__ import annotations

import json
import os
import stat

import pytest

pytestmark = pytest.mark.timeout(60)


def test_ping_and_version(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    assert conn.call(b'{"jsonrpc":"2.0","method":"ping","id":1}\n') == {
        "jsonrpc": "2.0",
        "result": "pong",
        "id": 1,
    }
    answer = conn.call(b'{"jsonrpc":"2.0","method":"version","id":"v"}\n')
    assert answer["id"] == "v"
    assert answer["result"]["protocol"] == 1
    assert isinstance(answer["result"]["version"], str)


def test_socket_mode_is_0660(wconfd):
    assert stat.S_IMODE(os.stat(wconfd.socket).st_mode) == 0o660


@pytest.mark.parametrize(
    ("frame", "code", "kind"),
    [
        (b"\xff\xfe not utf-8\n", -32700, "ParseError"),
        (b'{"jsonrpc": "2.0", "method": "ping", "id": 1\n', -32700, "ParseError"),
        (b"nonsense\n", -32700, "ParseError"),
        (b'"just a string"\n', -32600, "InvalidRequest"),
        (b'{"method": "ping", "id": 1}\n', -32600, "InvalidRequest"),
        (b'{"jsonrpc": "1.0", "method": "ping", "id": 1}\n', -32600, "InvalidRequest"),
        (b'{"jsonrpc": "2.0", "method": 5, "id": 1}\n', -32600, "InvalidRequest"),
        (b'{"jsonrpc": "2.0", "method": "ping", "params": 3, "id": 1}\n', -32600, "InvalidRequest"),
        (b"[]\n", -32600, "InvalidRequest"),
        (b'{"jsonrpc": "2.0", "method": "no_such", "id": 1}\n', -32601, "MethodNotFound"),
        (
            b'{"jsonrpc": "2.0", "method": "ping", "params": {"x": 1}, "id": 1}\n',
            -32602,
            "InvalidParams",
        ),
        (
            b'{"jsonrpc": "2.0", "method": "ping", "params": [1], "id": 1}\n',
            -32602,
            "InvalidParams",
        ),
    ],
)
def test_bad_input_gets_typed_error_and_connection_stays(wconfd, raw_factory, frame, code, kind):
    conn = raw_factory(wconfd.socket)
    answer = conn.call(frame)
    assert answer["error"]["code"] == code
    assert answer["error"]["data"]["type"] == kind
    assert "Traceback" not in json.dumps(answer)
    assert conn.call(b'{"jsonrpc":"2.0","method":"ping","id":2}\n')["result"] == "pong"


def test_wrong_param_type_names_the_param(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    answer = conn.call(
        b'{"jsonrpc":"2.0","method":"identify","params":{"job_id":"x","pid":1,"start_time":1},'
        b'"id":1}\n'
    )
    assert answer["error"]["data"]["type"] == "InvalidParams"
    assert "job_id" in answer["error"]["message"]
    answer = conn.call(b'{"jsonrpc":"2.0","method":"identify","params":{"pid":1},"id":1}\n')
    assert answer["error"]["data"]["type"] == "InvalidParams"
    assert "job_id" in answer["error"]["message"] or "start_time" in answer["error"]["message"]


def test_notification_gets_no_answer(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    conn.send(b'{"jsonrpc":"2.0","method":"ping"}\n')
    conn.send(b'{"jsonrpc":"2.0","method":"no_such"}\n')
    assert conn.call(b'{"jsonrpc":"2.0","method":"ping","id":7}\n')["id"] == 7


def test_batch_is_answered_member_by_member(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    answer = conn.call(
        b'[{"jsonrpc":"2.0","method":"ping","id":1},'
        b'{"jsonrpc":"2.0","method":"ping"},'
        b'{"foo":"bar"},'
        b'{"jsonrpc":"2.0","method":"nope","id":3},'
        b'{"jsonrpc":"2.0","method":"version","id":4}]\n'
    )
    assert isinstance(answer, list)
    assert len(answer) == 4  # the notification gets nothing
    by_id = {a.get("id"): a for a in answer if a.get("id") is not None}
    assert by_id[1]["result"] == "pong"
    assert by_id[3]["error"]["data"]["type"] == "MethodNotFound"
    assert by_id[4]["result"]["protocol"] == 1
    invalid = [a for a in answer if a["id"] is None]
    assert len(invalid) == 1 and invalid[0]["error"]["data"]["type"] == "InvalidRequest"


def test_batch_of_notifications_gets_nothing(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    conn.send(b'[{"jsonrpc":"2.0","method":"ping"},{"jsonrpc":"2.0","method":"ping"}]\n')
    assert conn.call(b'{"jsonrpc":"2.0","method":"ping","id":9}\n')["id"] == 9


def test_params_by_position_and_by_name(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    pid = os.getpid()
    import psutil

    start = psutil.Process(pid).create_time()
    by_pos = conn.call(
        json.dumps(
            {"jsonrpc": "2.0", "method": "identify", "params": [None, pid, start, "t"], "id": 1}
        ).encode()
        + b"\n"
    )
    assert by_pos["result"]["client_id"].startswith(f"t:{pid}:")
    by_name = conn.call(
        json.dumps(
            {
                "jsonrpc": "2.0",
                "method": "identify",
                "params": {"job_id": None, "pid": pid, "start_time": start, "name": "t"},
                "id": 2,
            }
        ).encode()
        + b"\n"
    )
    assert by_name["result"] == by_pos["result"]


def test_pipelined_requests_all_answered_with_their_ids(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    frames = b"".join(
        json.dumps({"jsonrpc": "2.0", "method": "ping", "id": i}).encode() + b"\n"
        for i in range(500)
    )
    conn.send(frames)
    ids = {json.loads(conn.line())["id"] for _ in range(500)}
    assert ids == set(range(500))


def test_oversized_message_is_refused_and_connection_closed(daemon_factory, raw_factory):
    d = daemon_factory("wconfd", "--max-message-bytes", "1024").start()
    conn = raw_factory(d.socket)
    answer = conn.call(b'{"jsonrpc":"2.0","method":"ping","id":1,"pad":"' + b"x" * 2000 + b'"}\n')
    assert answer["error"]["data"]["type"] == "InvalidRequest"
    assert "1024" in answer["error"]["message"]
    assert conn.closed_by_peer()
    # A message that never ends is cut off too, and the daemon keeps serving others.
    endless = raw_factory(d.socket)
    endless.send(b"{" + b" " * 4096)
    assert json.loads(endless.line())["error"]["data"]["type"] == "InvalidRequest"
    assert endless.closed_by_peer()
    assert (
        raw_factory(d.socket).call(b'{"jsonrpc":"2.0","method":"ping","id":1}\n')["result"]
        == "pong"
    )


def test_truncated_frame_then_disconnect_leaves_daemon_serving(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    conn.send(b'{"jsonrpc":"2.0","meth')
    conn.close()
    other = raw_factory(wconfd.socket)
    assert other.call(b'{"jsonrpc":"2.0","method":"ping","id":1}\n')["result"] == "pong"


def test_blank_lines_are_ignored(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    assert conn.call(b'\n\n  \n{"jsonrpc":"2.0","method":"ping","id":1}\n')["result"] == "pong"


def test_luxid_answers_the_common_methods(luxid, raw_factory):
    conn = raw_factory(luxid.socket)
    assert conn.call(b'{"jsonrpc":"2.0","method":"ping","id":1}\n')["result"] == "pong"
    assert conn.call(b'{"jsonrpc":"2.0","method":"version","id":2}\n')["result"]["protocol"] == 1


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_the_event_loop_is_chosen_by_flag_and_logged(daemon_factory, loop):
    pytest.importorskip("uvloop")
    daemon = daemon_factory("wconfd", "--event-loop", loop).start()
    from client import WConfdClient

    with WConfdClient(daemon.socket, name="loop") as wc:
        assert wc.ping() == "pong"
    assert f"runs on the {loop} event loop" in daemon.log()


def test_auto_takes_uvloop_when_installed(daemon_factory, monkeypatch):
    pytest.importorskip("uvloop")
    monkeypatch.setenv("LW_EVENT_LOOP", "auto")
    daemon = daemon_factory("wconfd").start()
    assert "runs on the uvloop event loop" in daemon.log()
