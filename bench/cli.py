"""Operator surfaces: wall time of `lw --help` and `lw job list` (target <= 150 ms each,
median of 20 runs), and RAPI `GET /2/jobs?bulk=1` with 1,000 jobs (p50).

For context on a noisy machine the same run also times a bare `python -c pass` and
`python -c "import client"` (the floor every `lw` invocation pays).  The 1,000 jobs are
rejected at submit by a REJECT filter, so they exist (finalized) without 1,000 job
processes; the listing's cost does not depend on how a job ended.
"""

from __future__ import annotations

import base64
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# This folder (first on sys.path) holds queue.py: put it last so the stdlib's queue wins;
# _util is still found here.
sys.path.append(sys.path.pop(0))

from _util import BIN, daemon, rapi, summary

from client import LuxiClient

RUNS = 20
JOBS = 1000
REQUESTS = 30
TARGET_MS = 150


def wall_ms(commands: dict[str, list[str]], runs: int = RUNS) -> dict[str, float]:
    """Median wall time (ms) of running each command to completion.

    The commands take turns (one run of each per round, after a warm-up round), so the
    machine's noise hits them alike and their differences mean something.
    """
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for round_ in range(runs + 1):
        for name, argv in commands.items():
            start = time.perf_counter()
            subprocess.run(argv, capture_output=True, check=True)
            if round_:
                samples[name].append(time.perf_counter() - start)
    return {name: round(statistics.median(s) * 1000, 1) for name, s in samples.items()}


def fill_queue(run: Path) -> None:
    """JOBS jobs in the queue, rejected at submit (finalized, no job processes)."""
    with LuxiClient(run / "luxid.sock", timeout=120) as lc:
        lc.replace_filter(uuid=None, priority=0, predicates=[], action="REJECT", reason=[])
        op = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
        for _ in range(0, JOBS, 100):
            lc.submit_many_jobs(jobs=[[op]] * 100)
        assert len(lc.query_jobs(ids=None, fields=["id"])) == JOBS


def rapi_bulk_jobs(run: Path, state: Path) -> dict[str, float]:
    """Latency of GET /2/jobs?bulk=1 over one keep-alive connection, authenticated."""
    from client.rapi_users import User, format_user, hash_password

    (state / "rapi_users").write_text(format_user(User("bench", hash_password("pw"))) + "\n")
    auth = {"Authorization": "Basic " + base64.b64encode(b"bench:pw").decode()}
    with rapi(run, state) as conn:
        samples, size = [], 0
        for i in range(REQUESTS + 2):
            start = time.perf_counter()
            conn.request("GET", "/2/jobs?bulk=1", headers=auth)
            resp = conn.getresponse()
            body = resp.read()
            elapsed = time.perf_counter() - start
            assert resp.status == 200, body[:200]
            if i >= 2:  # the first calls connect to luxid and check the password
                samples.append(elapsed)
            size = len(body)
        assert len(json.loads(body)) == JOBS
    return {**summary(samples), "bytes": size}


def main() -> None:
    lw = str(BIN / "lw")
    python = sys.executable
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
        root = Path(tmp)
        with daemon("wconfd", base=root) as (run, state), daemon("luxid", base=root):
            job_list = [lw, "--run-dir", str(run), "job", "list"]
            times = wall_ms(
                {
                    "lw_help_ms": [lw, "--help"],
                    "lw_job_list_ms": job_list,
                    "python_startup_ms": [python, "-c", "pass"],
                    "python_import_client_ms": [python, "-c", "import client"],
                }
            )
            fill_queue(run)
            times |= wall_ms({"lw_job_list_1000_jobs_ms": job_list}, runs=5)
            rapi = rapi_bulk_jobs(run, state)
    floor = times["python_import_client_ms"]
    print(
        json.dumps(
            {
                "bench": "cli",
                "lw_help_ms": times["lw_help_ms"],
                "lw_job_list_ms": times["lw_job_list_ms"],
                "target_ms": TARGET_MS,
                # What `lw` adds on top of importing the client package, which every
                # invocation pays first (the console script lives in client.cli).
                "lw_help_over_import_client_ms": round(times["lw_help_ms"] - floor, 1),
                "lw_job_list_over_import_client_ms": round(times["lw_job_list_ms"] - floor, 1),
                "python_startup_ms": times["python_startup_ms"],
                "python_import_client_ms": floor,
                "lw_job_list_1000_jobs_ms": times["lw_job_list_1000_jobs_ms"],
                "rapi_jobs_bulk_1000": rapi,
                "runs": RUNS,
            }
        )
    )


if __name__ == "__main__":
    main()
