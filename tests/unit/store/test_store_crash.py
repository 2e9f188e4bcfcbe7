"""Crash durability: whatever a killed writer acknowledged is there after reopening."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from store_testlib import submit

from luxid.jobs import job_status, new_job
from luxid.storage import SqliteJobStore

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent  # store_testlib, for the writer script

# The writer acknowledges (prints) each change only after the store call returned, i.e.
# after COMMIT: exactly what luxid does before answering a client.
WRITER = textwrap.dedent(
    """
    import os, sys
    from luxid.jobs import new_job, start_job, mark_opcode_running, finish_opcode, add_log
    from luxid.storage import SqliteJobStore
    from store_testlib import submit_many, tx_submit, update_jobs

    store = SqliteJobStore.open(sys.argv[1])
    mode = sys.argv[2]
    ops = [{"OP_ID": "OP_TEST_DELAY", "duration": 0}]
    i = 0
    while True:
        i += 1
        if mode == "exit-in-transaction" and i == 50:
            with store.transaction() as tx:
                tx_submit(tx, [lambda jid: new_job(jid, ops, 1.0)] * 3)
                os._exit(3)
        batch = 1 + i % 3
        jobs = submit_many(store, [lambda jid: new_job(jid, ops, float(jid))] * batch)
        print("S", *[j.id for j in jobs], flush=True)
        job = jobs[0]
        job = mark_opcode_running(start_job(job, 2.0, os.getpid(), 1.0), 0, 2.0)
        job = add_log(job, 0, 2.5, "message", "ran %d" % job.id)
        job = finish_opcode(job, 0, 3.0, True, job.id)
        update_jobs(store, [job])
        print("U", job.id, flush=True)
    """
)


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join((str(REPO), str(HERE), env.get("PYTHONPATH", "")))
    return env


def _check(db: Path, submitted: set[int], updated: set[int]) -> None:
    with SqliteJobStore.open(db) as store:
        live = {j.id: j for j in store.load_live()}
        assert submitted <= set(live), f"lost jobs: {sorted(submitted - set(live))}"
        for job_id in updated:
            job = live[job_id]
            assert job_status(job) == "success" and job.ops[0].result == job_id
            assert job.ops[0].log[0].message == f"ran {job_id}"
        assert store.last_job_id >= max(submitted)
        # ids are never reused after a crash either
        new = submit(store, lambda jid: new_job(jid, [{"OP_ID": "OP_TEST_DELAY"}], 9.0))
        assert new.id > max(live)


@pytest.mark.parametrize("acks_before_kill", [1, 37, 250])
def test_sigkill_loses_nothing_acknowledged(tmp_path: Path, acks_before_kill: int) -> None:
    db = tmp_path / "jobs.sqlite"
    proc = subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), "run"],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    submitted: set[int] = set()
    updated: set[int] = set()
    assert proc.stdout is not None
    try:
        for _ in range(acks_before_kill):
            line = proc.stdout.readline().split()
            assert line, "writer died early"
            if line[0] == "S":
                submitted.update(int(x) for x in line[1:])
            else:
                updated.add(int(line[1]))
        # kill while it keeps writing: most likely inside a transaction or a commit
        os.kill(proc.pid, signal.SIGKILL)
        # lines already written before the kill were acknowledged too
        for raw in proc.stdout:
            line = raw.split()
            if line and line[0] == "S":
                submitted.update(int(x) for x in line[1:])
            elif line:
                updated.add(int(line[1]))
    finally:
        proc.kill()
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    _check(db, submitted, updated)


def test_exit_inside_a_transaction_keeps_only_commits(tmp_path: Path) -> None:
    db = tmp_path / "jobs.sqlite"
    out = subprocess.run(
        [sys.executable, "-c", WRITER, str(db), "exit-in-transaction"],
        capture_output=True,
        text=True,
        env=_env(),
        timeout=60,
    )
    assert out.returncode == 3, out.stderr
    submitted = {
        int(x) for line in out.stdout.splitlines() if line[0] == "S" for x in line.split()[1:]
    }
    updated = {int(line.split()[1]) for line in out.stdout.splitlines() if line[0] == "U"}
    _check(db, submitted, updated)
    with SqliteJobStore.open(db) as store:
        # the uncommitted batch is gone: live jobs are exactly the acknowledged ones + 1 new
        live_ids = {j.id for j in store.load_live()}
        assert live_ids - submitted == {max(live_ids)}
