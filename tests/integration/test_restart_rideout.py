"""Jobs ride out daemon restarts (docs/contracts.md#reliability-and-security): kill -9 and an
immediate restart of wconfd or luxid, ten times in about seven seconds while 70 jobs take locks and
run, and every job still ends `success`, with no lock or waiting request left behind.

The job processes' stubs reconnect, re-identify, re-issue what was in flight where the API
declares it safe (lock calls, frees, reads, job reports) and wait out the restart.
"""

from __future__ import annotations

import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import FINAL, Stack, delay

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

JOBS = 70
RESTARTS = 10
SPAN = 7.0  # seconds over which the restarts are spread
NODES = [f"n{i}" for i in range(10)]


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def _jobs(rng: random.Random) -> list[list[dict[str, object]]]:
    """70 jobs of three opcodes, each holding one or two of ten node locks for 50-250 ms:
    enough contention that lock waits, grants and frees are in flight at every moment."""
    return [
        [
            delay(rng.uniform(0.05, 0.25), on_nodes=rng.sample(NODES, rng.randint(1, 2)))
            for _ in range(3)
        ]
        for _ in range(JOBS)
    ]


def _submit(stack: Stack, rng: random.Random) -> list[int]:
    answers = stack.lc.submit_many_jobs(jobs=_jobs(rng))
    assert all(ok for ok, _ in answers), answers
    return [int(job_id) for _, job_id in answers]


def _restart_repeatedly(stack: Stack, restart: Callable[[], None], ids: list[int]) -> None:
    """Call `restart` RESTARTS times, evenly over SPAN seconds; check that jobs were still
    running at the third restart (the jobs need at least ~3 s: 210 opcodes averaging 150 ms
    on ten node locks), so the restarts really hit running jobs."""
    start = time.monotonic()
    for i in range(RESTARTS):
        restart()
        if i == 2:
            rows = stack.lc.query_jobs(ids=ids, fields=["status"])
            assert any(row[0] not in FINAL for row in rows), "the jobs ended before the restarts"
        pause = start + SPAN * (i + 1) / RESTARTS - time.monotonic()
        if pause > 0:
            time.sleep(pause)


def _all_succeed(stack: Stack, ids: list[int]) -> None:
    outcomes = {job_id: stack.wait_final(job_id, timeout=180) for job_id in ids}
    failed = {i: s for i, s in outcomes.items() if s != "success"}
    if failed:
        rows = stack.lc.query_jobs(ids=sorted(failed), fields=["id", "status", "opresult"])
        pytest.fail(f"{len(failed)} of {len(ids)} jobs did not succeed: {rows}")
    stack.until(lambda: not stack.job_locks() and not stack.job_pending(), timeout=30)


def test_jobs_ride_out_ten_kill9_restarts_of_wconfd(stack):
    ids = _submit(stack, random.Random(10))
    stack.wait_status(ids[0], "running", *FINAL)
    _restart_repeatedly(stack, lambda: stack.restart_wconfd(kill=True), ids)
    _all_succeed(stack, ids)


def test_jobs_ride_out_ten_kill9_restarts_of_luxid(stack):
    ids = _submit(stack, random.Random(11))
    stack.wait_status(ids[0], "running", *FINAL)
    _restart_repeatedly(stack, lambda: stack.restart_luxid(kill=True), ids)
    _all_succeed(stack, ids)
