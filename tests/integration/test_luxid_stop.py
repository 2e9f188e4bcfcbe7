"""Stopping wconfd and luxid together always ends (systemctl stop of the target;
docs/contracts.md#reliability-and-security).

50 trials on one pair of directories: both daemons start, something happens (nothing, a
job running, a client submitting, wconfd stopped first), then both get SIGTERM in random
order and at random moments.  Each must exit 0 within 5 s; every job luxid acknowledged
is there after the next start (each trial's start is the previous one's restart).
"""

from __future__ import annotations

import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from client import LuxiClient, errors

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import FINAL, delay

pytestmark = [
    pytest.mark.timeout(420),
    pytest.mark.slow,
]  # 79-158 s measured on a shared, loaded machine, mostly daemon start-up

TRIALS = 50
STOP_LIMIT = 5.0
SCENARIOS = ("idle", "mid-job", "mid-submit", "wconfd-gone")


def exit_within(daemon: Any, limit: float) -> tuple[int | None, float]:
    """Wait for the daemon's exit: (code or None if still running, seconds waited)."""
    assert daemon.proc is not None
    start = time.monotonic()
    try:
        code = daemon.proc.wait(limit)
    except subprocess.TimeoutExpired:
        code = None
    return code, time.monotonic() - start


def start_both(*daemons: Any) -> None:
    """Start the daemons at once (they find each other) and wait until both serve."""
    for daemon in daemons:
        daemon.start(wait=False)
    for daemon in daemons:
        daemon.wait_ready()


class Submitter(threading.Thread):
    """A client submitting jobs until the daemon goes away; records what was acknowledged."""

    def __init__(self, socket: Path) -> None:
        super().__init__(daemon=True)
        self.socket = socket
        self.acked: list[int] = []
        self.started_submitting = threading.Event()

    def run(self) -> None:
        try:
            with LuxiClient(self.socket, timeout=10, patience=0.5) as lc:
                while True:
                    self.acked.append(lc.submit_job(ops=[delay(0)]))
                    self.started_submitting.set()
        except errors.RpcError:
            self.started_submitting.set()


def test_fifty_stops_of_both_daemons_end_in_time_and_lose_nothing(daemon_factory):
    rnd = random.Random(20261201)
    wconfd = daemon_factory("wconfd", "--log-level", "DEBUG")
    luxid = daemon_factory("luxid", "--log-level", "DEBUG")
    acked: list[int] = []
    slow: list[str] = []
    for trial in range(TRIALS):
        scenario = SCENARIOS[trial % len(SCENARIOS)]
        start_both(wconfd, luxid)
        with LuxiClient(luxid.socket, timeout=10) as lc:
            if acked:  # the previous trials' acknowledged jobs survived the restart
                rows = lc.query_jobs(ids=acked, fields=["id"])
                assert rows == [[j] for j in acked], f"trial {trial}: lost jobs"
            submitter = None
            if scenario == "mid-job":
                job = lc.submit_job(ops=[delay(0.3)])
                acked.append(job)
                answer = lc.wait_for_job_change(
                    job_id=job, fields=["status"], prev_values=["queued"],
                    prev_log_serial=None, timeout=5,
                )  # fmt: skip
                assert answer == "nochange" or answer.values[0] in ("running", *FINAL)
            elif scenario == "mid-submit":
                submitter = Submitter(luxid.socket)
                submitter.start()
                submitter.started_submitting.wait(5)
        time.sleep(rnd.uniform(0, 0.2))
        order = [wconfd, luxid]
        rnd.shuffle(order)
        if scenario == "wconfd-gone":
            order = [wconfd, luxid]
        first, second = order
        assert first.proc is not None and second.proc is not None
        first.proc.terminate()
        if scenario == "wconfd-gone":
            code, _ = exit_within(first, STOP_LIMIT)
            assert code == 0, f"trial {trial}: wconfd exited {code}"
        time.sleep(rnd.choice([0, 0, rnd.uniform(0, 0.05)]))
        second.proc.terminate()
        for daemon in order:
            code, waited = exit_within(daemon, STOP_LIMIT)
            if code is None:
                daemon.proc.kill()  # type: ignore[union-attr]
                daemon.proc.wait()  # type: ignore[union-attr]
                pytest.fail(f"trial {trial} ({scenario}): {daemon.name} still running after "
                            f"{STOP_LIMIT} s:\n{daemon.log()[-3000:]}")  # fmt: skip
            assert code == 0, f"trial {trial} ({scenario}): {daemon.name} exited {code}"
            if waited > 2.5:
                slow.append(f"trial {trial} {daemon.name} {waited:.1f} s")
        if submitter is not None:
            submitter.join(10)
            assert not submitter.is_alive()
            acked.extend(submitter.acked)
    # the last start: everything acknowledged is there
    start_both(wconfd, luxid)
    with LuxiClient(luxid.socket, timeout=10) as lc:
        rows = lc.query_jobs(ids=acked, fields=["id"])
        assert rows == [[j] for j in acked]
        for job_id, status in lc.query_jobs(ids=None, fields=["id", "status"]):
            if status not in FINAL:
                lc.cancel_job(job_id=job_id, kill=True)
    assert not slow, slow
