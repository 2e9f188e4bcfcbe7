"""`lw up [--demo]` (docs/contracts.md#the-two-commands): the dev stack comes up, answers, fills an
empty cluster, stops cleanly on SIGINT/SIGTERM, and stops everything when one daemon dies."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import psutil
import pytest

pytestmark = pytest.mark.timeout(120)

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Up:
    """A running `lw up` whose stdout goes to a file we poll."""

    def __init__(self, root: Path, *extra: str) -> None:
        self.run_dir, self.state_dir = root / "run", root / "state"
        self.port = free_port()
        self.out_path = root / f"up-{time.monotonic_ns()}.out"
        self.err_path = self.out_path.with_suffix(".err")
        with open(self.out_path, "w") as out, open(self.err_path, "w") as err:
            self.proc = subprocess.Popen(
                [
                    str(BIN / "lw"), "up", "--run-dir", str(self.run_dir),
                    "--state-dir", str(self.state_dir), "--rapi-port", str(self.port),
                    "--log-level", "WARNING", *extra,
                ],
                stdout=out,
                stderr=err,
            )  # fmt: skip

    def output(self) -> str:
        return self.out_path.read_text() + self.err_path.read_text()

    def wait_for(self, text: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while text not in self.output():
            if self.proc.poll() is not None:
                raise AssertionError(f"lw up exited {self.proc.returncode}:\n{self.output()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no {text!r} after {timeout} s:\n{self.output()}")
            time.sleep(0.05)
        return self.output()

    def pids(self) -> dict[str, int]:
        return {
            m[0]: int(m[1])
            for m in re.findall(r"lw up: (\w+) +ready .*\(pid (\d+)\)", self.output())
        }

    def stop(self, sig: int = signal.SIGINT) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(60)

    def lw(self, *args: str) -> Any:
        done = subprocess.run(
            [str(BIN / "lw"), "--run-dir", str(self.run_dir), *args, "--json"],
            capture_output=True, text=True, timeout=30,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout)

    def http(self, method: str, path: str) -> tuple[int, Any]:
        # Writes are JSON (lw-rapi answers 415 to any other body before it authenticates).
        data, headers = (
            (None, {}) if method == "GET" else (b"{}", {"Content-Type": "application/json"})
        )
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}", data=data, headers=headers, method=method
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            return exc.code, json.loads(exc.read())


@pytest.fixture
def ups() -> Any:
    made: list[Up] = []

    def make(root: Path, *extra: str) -> Up:
        made.append(Up(root, *extra))
        return made[-1]

    yield make
    for up in made:
        with contextlib.suppress(Exception):
            up.stop(signal.SIGTERM)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_demo_stack_comes_up_answers_and_stops_on_sigint(tmp_path: Path, ups: Any) -> None:
    up = ups(tmp_path, "--demo")
    out = up.wait_for("Ctrl-C stops everything")
    assert str(up.run_dir / "wconfd.sock") in out and str(up.run_dir / "luxid.sock") in out
    assert f"http://127.0.0.1:{up.port}/" in out
    assert "demo: added nodes node1, node2, node3" in out
    pids = up.pids()
    assert set(pids) == {"wconfd", "luxid", "rapi"}

    assert [n["name"] for n in up.lw("node", "list")] == ["node1", "node2", "node3"]
    assert up.http("GET", "/2/nodes")[1] == [
        {"id": f"node{i}", "uri": f"/2/nodes/node{i}"} for i in (1, 2, 3)
    ]  # anonymous reads in demo mode
    status, body = up.http("POST", "/2/filters")
    assert status == 401 and body["code"] == 401

    assert up.stop(signal.SIGINT) == 0
    assert "lw up: stopped" in up.output()
    for pid in pids.values():
        assert gone(pid)

    # Again on the same state: the cluster has nodes, so --demo leaves it alone.
    up = ups(tmp_path, "--demo")
    out = up.wait_for("Ctrl-C stops everything")
    assert "left as it is" in out
    assert len(up.lw("node", "list")) == 3
    assert up.stop(signal.SIGTERM) == 0


def test_one_daemon_dying_stops_the_rest(tmp_path: Path, ups: Any) -> None:
    up = ups(tmp_path)
    up.wait_for("Ctrl-C stops everything")
    pids = up.pids()
    os.kill(pids["luxid"], signal.SIGKILL)
    assert up.proc.wait(60) == 1
    assert "lw-luxid exited" in up.output()
    for pid in pids.values():
        assert gone(pid)


def test_refuses_a_run_dir_with_a_live_daemon(
    tmp_path: Path, ups: Any, daemon_factory: Any
) -> None:
    daemon_factory("wconfd").start()
    up = ups(tmp_path, "--no-rapi")
    assert up.proc.wait(60) == 1
    assert "a wconfd already answers on" in up.output()
    assert "ready on" not in up.output()
