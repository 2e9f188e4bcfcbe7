"""Compare this checkout's benchmark figures with another checkout's, in one run.

    python bench/compare.py --base ../lockwarden-before [--only locks,queue] [--rounds 2]

Runs each benchmark script of `make bench` (bench/report.py's PLAN) in both checkouts,
alternating (base, this, this, base, ...) so that both see the same machine, each with its
own checkout's interpreter (`<checkout>/.venv/bin/python`, else this one), and prints one
table: every headline figure, the base's and this checkout's median over the rounds, and
this one's change, signed so that a positive change is always better.  The machines these
run on are noisy: compare within one run, never across runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from report import PLAN, parse

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Figure:
    """One headline number of a script's JSON: its key path and which way is better."""

    name: str
    script: str
    path: tuple[str, ...]
    higher_is_better: bool


FIGURES = [
    Figure("ping ratio vs bare echo (uvloop)", "rpc_roundtrip", ("ratio_uvloop",), True),
    Figure("lock cycles/s, one client", "locks", ("single_client_cycles_per_s",), True),
    Figure("lock cycles/s holding 500", "locks", ("holding_500_cycles_per_s",), True),
    Figure("lock cycles/s, 8 processes", "locks", ("contended_cycles_per_s",), True),
    Figure("dead holder → granted p50 ms", "death", ("p50_ms",), False),
    Figure("dead holder → granted p99 ms", "death", ("p99_ms",), False),
    Figure("get_config 10,000 p50 ms", "config", ("get_config_p50_ms", "10000"), False),
    Figure("update_object 10,000/10 ratio", "config", ("update_object_ratio",), False),
    Figure("submit_job/s sequential", "queue", ("submit", "sequential_per_s"), True),
    Figure("submit → running p50 ms", "queue", ("submit_to_running", "p50_ms"), False),
    Figure("luxid RSS MB, 100,000 archived", "queue", ("rss", "rss_mb"), False),
    Figure("cancel_job/s", "cancel", ("cancel_per_s",), True),
    Figure("burst received → opexec p50 ms", "burst", ("received_to_opexec_p50_ms",), False),
    Figure("end-to-end jobs/s", "job_life", ("end_to_end", "jobs_per_s"), True),
    Figure("scheduling pass cold ms", "filters", ("pass", "cold_pass_ms"), False),
    Figure("scheduling pass warm ms", "filters", ("pass", "warm_pass_ms"), False),
    Figure("node drain 1,000 s", "drain", ("complete_s",), False),
    Figure("drain deadline late max ms", "drain", ("deadline_delay_ms", "max"), False),
    Figure("etcd failover p50 s", "ha", ("failover_kill9_to_first_answer", "p50_s"), False),
    Figure("etcd lock cycles/s, 8 clients", "ha", ("lock_cycles_per_s", "etcd", "8_clients"), True),
    Figure("etcd submit_job/s, 64 in flight", "ha_luxid", ("etcd", "pipelined_64_per_s"), True),
]


def interpreter(checkout: Path) -> str:
    """The checkout's own venv interpreter (its editable install), else this one."""
    candidate = checkout / ".venv" / "bin" / "python"
    return str(candidate) if candidate.exists() else sys.executable


def run(checkout: Path, script: str) -> dict[str, Any]:
    """One script of `checkout`, with make bench's arguments and time limit; its JSON."""
    args, limit = PLAN[script]
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen(
            [interpreter(checkout), str(checkout / "bench" / f"{script}.py"), *args],
            cwd=checkout,
            stdout=out,
            stderr=subprocess.DEVNULL,
        )
        try:
            proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            return {"error": f"timed out after {limit:.0f} s"}
        out.seek(0)
        return parse(out.read()) or {"error": f"exit {proc.returncode}, no JSON"}


def lookup(result: dict[str, Any], path: tuple[str, ...]) -> float | None:
    value: Any = result
    for key in path:
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return float(value) if isinstance(value, int | float) else None


def change(base: float, this: float, higher_is_better: bool) -> float:
    """This checkout's change against the base, positive when better."""
    if base == 0:
        return 0.0
    ratio = this / base if higher_is_better else base / this if this else float("inf")
    return ratio - 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=True, help="the other checkout")
    parser.add_argument("--only", default="", help="comma-separated scripts (default: PLAN)")
    parser.add_argument("--rounds", type=int, default=1, help="alternations per script")
    parser.add_argument("--json", type=Path, help="also write every result here")
    args = parser.parse_args()
    this = BENCH.parent
    scripts = [s for s in args.only.split(",") if s] or list(PLAN)
    results: dict[str, dict[str, list[dict[str, Any]]]] = {}
    for script in scripts:
        pair = [("base", args.base.resolve()), ("this", this)]
        for round_no in range(args.rounds):
            # base-this, then this-base: a script's after-effects (dirty pages, exiting
            # daemons) weigh on whichever runs second, so neither side always does.
            for side, checkout in pair if round_no % 2 == 0 else pair[::-1]:
                started = time.monotonic()
                result = run(checkout, script)
                results.setdefault(script, {}).setdefault(side, []).append(result)
                took = time.monotonic() - started
                print(f"== {script} ({side}, {took:.0f} s): {json.dumps(result)[:200]}", flush=True)
    if args.json:
        args.json.write_text(json.dumps(results) + "\n")
    print("\n| figure | base | this | change (+ is better) |\n|---|---|---|---|")
    for fig in FIGURES:
        if fig.script not in results:
            continue
        sides = results[fig.script]
        values = {
            side: [v for r in sides.get(side, []) if (v := lookup(r, fig.path)) is not None]
            for side in ("base", "this")
        }
        if not values["base"] or not values["this"]:
            print(f"| {fig.name} | — | — | not measured |")
            continue
        base, mine = statistics.median(values["base"]), statistics.median(values["this"])
        delta = change(base, mine, fig.higher_is_better)
        print(f"| {fig.name} | {base:g} | {mine:g} | {delta:+.1%} |")


if __name__ == "__main__":
    main()
