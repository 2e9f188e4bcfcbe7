"""Start, refuse, replace, stop: the daemon life cycle (paths, sockets, signals:
docs/contracts.md#sockets-and-paths)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from client import LuxiClient, WConfdClient, errors

pytestmark = pytest.mark.timeout(60)
BIN = Path(sys.executable).parent


@pytest.mark.parametrize("name", ["wconfd", "luxid"])
def test_second_daemon_on_live_socket_exits_1(daemon_factory, name):
    first = daemon_factory(name).start()
    second = daemon_factory(name, root=first.run_dir.parent)
    second.log_path = first.run_dir.parent / "second.log"
    second.start(wait=False)
    assert second.proc.wait(15) == 1
    assert "stop it first" in second.log()
    # The first one still serves.
    assert (WConfdClient if name == "wconfd" else LuxiClient)(first.socket).ping() == "pong"


def test_stale_socket_is_replaced(daemon_factory, tmp_path):
    d = daemon_factory("wconfd")
    d.run_dir.mkdir(parents=True)
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(d.socket))  # bound, never listening: a dead daemon's leftover
    stale.close()
    d.start()
    assert WConfdClient(d.socket).ping() == "pong"
    assert "stale" in d.log()


def test_sigterm_stops_cleanly_and_removes_socket(wconfd):
    assert wconfd.socket.exists()
    assert wconfd.stop() == 0
    assert not wconfd.socket.exists()


def test_env_defaults_and_flags_win(tmp_path):
    env = dict(
        os.environ, LW_RUN_DIR=str(tmp_path / "envrun"), LW_STATE_DIR=str(tmp_path / "envstate")
    )
    proc = subprocess.Popen([str(BIN / "lw-luxid")], env=env, stderr=subprocess.PIPE)
    try:
        sock = tmp_path / "envrun" / "luxid.sock"
        client = LuxiClient(sock)
        for _ in range(200):
            try:
                assert client.ping() == "pong"
                break
            except errors.ConnectionError:
                import time

                time.sleep(0.05)
        else:
            pytest.fail("luxid did not come up on $LW_RUN_DIR")
        assert (tmp_path / "envstate").is_dir()
    finally:
        proc.terminate()
        proc.wait(10)
    # Flags win over the environment.
    proc = subprocess.Popen(
        [
            str(BIN / "lw-luxid"),
            "--run-dir",
            str(tmp_path / "flagrun"),
            "--state-dir",
            str(tmp_path / "flagstate"),
        ],
        env=env,
        stderr=subprocess.PIPE,
    )
    try:
        client = LuxiClient(tmp_path / "flagrun" / "luxid.sock")
        for _ in range(200):
            try:
                client.ping()
                break
            except errors.ConnectionError:
                import time

                time.sleep(0.05)
        assert (tmp_path / "flagstate").is_dir()
    finally:
        proc.terminate()
        proc.wait(10)


def test_stub_uses_lw_run_dir_by_default(wconfd, monkeypatch):
    monkeypatch.setenv("LW_RUN_DIR", str(wconfd.run_dir))
    assert WConfdClient().ping() == "pong"
    assert LuxiClient().socket_path == wconfd.run_dir / "luxid.sock"


def test_unreachable_daemon_raises_connection_error(tmp_path):
    client = WConfdClient(tmp_path / "nothing.sock")
    with pytest.raises(errors.ConnectionError) as info:
        client.ping()
    assert isinstance(info.value, errors.RpcError)
    assert "nothing.sock" in info.value.message and "running" in info.value.message


def test_help_text(tmp_path):
    for name in ("lw-wconfd", "lw-luxid"):
        out = subprocess.run(
            [str(BIN / name), "--help"], capture_output=True, text=True, check=True
        )
        for flag in ("--state-dir", "--run-dir", "--max-message-bytes", "--group"):
            assert flag in out.stdout
