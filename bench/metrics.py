"""The scrape cost of `GET /metrics` (docs/contracts.md#observability): lw-rapi asking both daemons'
get_metrics and rendering the Prometheus text, with 10,000 queued jobs and 1,000 held locks.

A PAUSE rule keeps the submitted jobs queued; one wconfd client holds the 1,000 locks.
The scrape is timed end to end over one keep-alive HTTP connection (target: p50 ≤ 20 ms);
each daemon's get_metrics through the sync stub and the dashboard's `/ui/state` (one
snapshot: luxid's query_queue_overview, then the ≤ 210 shown jobs) are timed too.  Prints one JSON object.
"""

from __future__ import annotations

import argparse
import http.client
import json
import tempfile
import time
from pathlib import Path

from _util import daemon, rapi, summary

from client import LuxiClient, WConfdClient

PAUSE_ALL = {"priority": 0, "predicates": [], "action": "PAUSE", "reason": []}
DELAY0 = {"OP_ID": "OP_TEST_DELAY", "duration": 0}


def timed_get(
    conn: http.client.HTTPConnection, path: str, rounds: int
) -> tuple[list[float], bytes]:
    samples, body = [], b""
    for _ in range(rounds):
        t = time.perf_counter()
        conn.request("GET", path)
        response = conn.getresponse()
        body = response.read()
        samples.append(time.perf_counter() - t)
        assert response.status == 200, (path, response.status, body[:200])
    return samples, body


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--locks", type=int, default=1_000)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lwbench-") as tmp:
        base = Path(tmp)
        with daemon("wconfd", base=base) as (run, state), daemon("luxid", base=base):
            lc = LuxiClient(run / "luxid.sock", timeout=120)
            wc = WConfdClient(run / "wconfd.sock", name="bench-holder", timeout=120)
            lc.replace_filter(uuid=None, **PAUSE_ALL)
            for start in range(0, args.jobs, 1000):
                lc.submit_many_jobs(jobs=[[DELAY0]] * min(1000, args.jobs - start))
            wc.update_locks_waiting(
                [[f"node/n{i:05d}", "exclusive"] for i in range(args.locks)], timeout=60
            )
            queued = lc.query_queue_info().counts["queued"]
            held = len(wc.list_locks())
            stub = {}
            for name, client in (("luxid", lc), ("wconfd", wc)):
                samples = []
                for _ in range(args.rounds):
                    t = time.perf_counter()
                    client.get_metrics()
                    samples.append(time.perf_counter() - t)
                stub[name] = summary(samples)
            with rapi(run, state, "--allow-anonymous-read") as conn:
                timed_get(conn, "/metrics", 5)  # warm: connections to both daemons open
                scrape, body = timed_get(conn, "/metrics", args.rounds)
                ui_state, _ = timed_get(conn, "/ui/state", max(5, args.rounds // 20))
            lc.close()
            wc.close()
    figures = {
        "queued_jobs": queued,
        "locks_held": held,
        "scrape": summary(scrape),
        "scrape_bytes": len(body),
        "target_p50_ms": 20,
        "ok": summary(scrape)["p50_ms"] <= 20,
        "get_metrics_stub": stub,
        "ui_state_for_comparison": summary(ui_state),
    }
    print(json.dumps(figures))


if __name__ == "__main__":
    main()
