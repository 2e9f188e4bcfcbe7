"""`lw up --ha N` (docs/contracts.md#replicated-control-plane): a local three-member etcd and N
nodes come up, one node's wconfd wins the election and its luxid serves while the other's names it,
and SIGTERM stops everything, etcd included."""

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
from etcd_testlib import require_etcd

from client import LuxiClient, WConfdClient, errors

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

        master = None
        deadline = time.monotonic() + 20
        while master is None:
            assert time.monotonic() < deadline, "no wconfd became master"
            with WConfdClient(run / "node1" / "wconfd.sock", name="probe") as wc:
                master = wc.get_role().master
            time.sleep(0.05)
        other = "node2" if master == "node1" else "node1"
        with (
            LuxiClient(run / master / "luxid.sock") as serving,
            LuxiClient(run / other / "luxid.sock") as standby,
        ):
            deadline = time.monotonic() + 10
            while True:
                try:
                    assert serving.submit_job(ops=[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]) >= 1
                    break
                except errors.NotMaster:
                    assert time.monotonic() < deadline
                    time.sleep(0.05)
            with pytest.raises(errors.NotMaster) as refused:
                standby.query_queue_info()
            assert refused.value.data["master"] == master
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
        assert not [c for c in children if c.is_running() and c.status() != psutil.STATUS_ZOMBIE]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
