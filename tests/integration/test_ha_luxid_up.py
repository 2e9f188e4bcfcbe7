"""`lw up --ha N` (SPEC §13): a local three-member etcd and N nodes come up, each node's
luxid follows the leader key (here taken by a stand-in for wconfd's election, so the test
does not depend on wconfd's own campaign), and SIGTERM stops everything, etcd included."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import Candidate, require_etcd

from client import LuxiClient, errors

pytestmark = pytest.mark.timeout(120)

BIN = Path(sys.executable).parent


def test_lw_up_ha_starts_etcd_and_nodes_that_follow_the_master(tmp_path: Path) -> None:
    require_etcd()
    out_path = tmp_path / "up.out"
    run = tmp_path / "run"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            [str(BIN / "lw"), "up", "--ha", "2", "--run-dir", str(run), "--state-dir",
             str(tmp_path / "state"), "--log-level", "WARNING"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    candidate = None
    try:
        deadline = time.monotonic() + 60
        while "running; Ctrl-C stops everything" not in out_path.read_text():
            assert proc.poll() is None and time.monotonic() < deadline, out_path.read_text()
            time.sleep(0.1)
        text = out_path.read_text()
        endpoints = re.findall(r"etcd\d\s+ready on (http://127\.0\.0\.1:\d+)", text)
        assert len(endpoints) == 3
        for node in ("node1", "node2"):
            for daemon in ("wconfd", "luxid"):
                assert f"{daemon}@{node} ready on {run / node / daemon}.sock" in text
        children = psutil.Process(proc.pid).children()
        assert len(children) == 3 + 2 * 2

        candidate = Candidate(endpoints, "/lockwarden", "node2")
        candidate.wait_for("elected", 15)
        with LuxiClient(run / "node2" / "luxid.sock") as two, LuxiClient(
            run / "node1" / "luxid.sock"
        ) as one:
            deadline = time.monotonic() + 10
            while True:
                try:
                    assert two.submit_job(ops=[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]) == 1
                    break
                except errors.NotMaster:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            with pytest.raises(errors.NotMaster) as refused:
                one.query_queue_info()
            assert refused.value.master == "node2"
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    finally:
        if candidate is not None:
            candidate.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
