"""100,000 archived jobs: memory stays bounded (luxid RSS ≤ 200 MB)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
HERE = Path(__file__).resolve().parent  # store_testlib, for the scripts

FILL = textwrap.dedent(
    """
    import json, resource, sys, time
    from luxid.jobs import add_log, finish_opcode, mark_opcode_running, new_job, start_job
    from luxid.storage import SqliteJobStore
    from store_testlib import counts, load_archived, submit, submit_many

    def peak_rss_mb():
        # VmHWM belongs to this address space: unlike ru_maxrss it does not inherit the
        # peak of the forking parent (pytest) across fork + exec.
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    store = SqliteJobStore.open(sys.argv[1])
    ops = [{"OP_ID": "OP_TEST_DELAY", "duration": 0.0, "on_nodes": ["n1", "n2"],
            "reason": [["cli", "scale test", 1]]}]

    def build(jid):
        job = start_job(new_job(jid, ops, 1000.0), 1000.1, 1234, 999.0)
        job = mark_opcode_running(job, 0, 1000.2)
        job = add_log(job, 0, 1000.3, "message", "done %d" % jid)
        return finish_opcode(job, 0, 1000.4, True, None)

    t0 = time.perf_counter()
    for _ in range(100):
        submit_many(store, [build] * 1000)
    t1 = time.perf_counter()
    archived = 0
    while True:
        done, remaining = store.auto_archive(older_than=2000.0, limit=10_000)
        archived += len(done)
        if not remaining:
            break
    t2 = time.perf_counter()
    submit(store, lambda jid: new_job(jid, ops, 3000.0))  # one live job
    print(json.dumps({
        "insert_s": t1 - t0, "archive_s": t2 - t1, "archived": archived,
        "maxrss_mb": peak_rss_mb(),
    }))
    """
)

REOPEN = textwrap.dedent(
    """
    import json, resource, sys, time
    import psutil
    from luxid.storage import SqliteJobStore
    from store_testlib import counts, load_archived, submit, submit_many

    def peak_rss_mb():
        # VmHWM belongs to this address space: unlike ru_maxrss it does not inherit the
        # peak of the forking parent (pytest) across fork + exec.
        try:
            with open("/proc/self/status") as f:
                for line in f:
                    if line.startswith("VmHWM:"):
                        return int(line.split()[1]) / 1024
        except OSError:
            pass
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    t0 = time.perf_counter()
    store = SqliteJobStore.open(sys.argv[1])
    live = store.load_live()
    counts = counts(store, archived=True)
    job = load_archived(store, 54321)
    print(json.dumps({
        "open_load_s": time.perf_counter() - t0, "live": [j.id for j in live],
        "archived_counts": counts, "log": job.ops[0].log[0].message,
        "rss_mb": psutil.Process().memory_info().rss / 2**20,
        "maxrss_mb": peak_rss_mb(),
    }))
    """
)


def _run(script: str, db: Path) -> dict[str, object]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join((str(REPO), str(HERE), env.get("PYTHONPATH", "")))
    out = subprocess.run(
        [sys.executable, "-c", script, str(db)],
        capture_output=True,
        text=True,
        env=env,
        timeout=110,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


def test_100k_archived_jobs_bounded_memory(tmp_path: Path) -> None:
    db = tmp_path / "jobs.sqlite"
    fill = _run(FILL, db)
    assert fill["archived"] == 100_000
    reopen = _run(REOPEN, db)
    print(f"\nstore 100k: fill {fill}\nreopen {reopen}, db {db.stat().st_size / 1e6:.1f} MB")
    assert reopen["live"] == [100_001]
    assert reopen["archived_counts"] == {"success": 100_000}
    assert reopen["log"] == "done 54321"
    assert float(reopen["maxrss_mb"]) < 100  # type: ignore[arg-type]
    assert float(fill["maxrss_mb"]) < 200  # type: ignore[arg-type]
