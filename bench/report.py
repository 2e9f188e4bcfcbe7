"""`make bench`: run the bench scripts one after another, print each one's JSON, then one
table of the figures of the performance targets (docs/contracts.md#performance-targets) —
`figure | measured | target | met?`.

The scripts that measure the table's rows (PLAN; `--all`: every script in bench/, the others
too) run in their own processes, one at a time (they measure the machine), under a time
limit; each one's JSON goes to `--out` (`.lw/bench/<script>.json`) and to stdout.  The table then takes
each row from the JSON of the script that measures it; a row whose script is missing
(bench/drain.py comes with the drains), failed or timed out says so instead of a figure.

`--only locks,death` runs just those scripts; `--table-only` re-prints the table from the
JSON already in `--out` without running anything.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
# Per script: the arguments `make bench` uses (sized so the whole run stays within ~10
# minutes on a 2-core machine) and its time limit in seconds.
PLAN: dict[str, tuple[list[str], float]] = {
    "rpc_roundtrip": ([], 120),
    "locks": ([], 120),
    "death": ([], 120),
    "config": ([], 240),
    "growth_wconfd": (["--trials", "2"], 600),
    "queue": (["--jobs", "1000", "--exec-jobs", "200"], 300),
    "cancel": (["--runs", "3"], 120),
    "burst": (["--runs", "5"], 120),
    "job_life": (["--jobs", "1000", "--bursts", "3", "--idle", "20"], 180),
    "filters": ([], 300),
    "budgets": ([], 180),
    "drain": ([], 180),
    "drain_plan": ([], 120),
    "ha": ([], 300),
    "ha_luxid": ([], 300),
    "ha_stalls": (["--leader-runs", "6", "--luxid-runs", "1"], 240),
    "etcd_tls": ([], 300),
    "why_job": ([], 180),
    "events": ([], 240),
    "big_frame": ([], 180),
    "audit": ([], 240),
    "growth_luxid": ([], 1200),
}
DEFAULT_LIMIT = 180.0

Json = dict[str, Any]


@dataclass(frozen=True)
class Row:
    """One row of the performance targets: where its figure comes from, how it is shown, whether it
    is met."""

    figure: str
    script: str
    measure: Callable[[Json], tuple[str, bool]]  # (measured, met) from the script's JSON
    target: str


def _uvloop_installed() -> bool:
    return importlib.util.find_spec("uvloop") is not None


def ping_ratio(j: Json) -> tuple[str, bool]:
    # The loop an operator gets: uvloop when it is installed (the daemons pick it then).
    loop = "uvloop" if _uvloop_installed() and "ratio_uvloop" in j else "asyncio"
    ratio = j[f"ratio_{loop}"]
    return f"{ratio} ({loop})", ratio >= 0.7


def lock_cycles(j: Json) -> tuple[str, bool]:
    # Beside the figure, the floor that "durable before the answer" (lock rule 7)
    # leaves on this disk, measured in the same run: two RWF_DSYNC flushes per cycle;
    # and with each call's round trip (a ping's) added, what a sync client could reach.
    rate = j["single_client_cycles_per_s"]
    shown = f"{rate}/s"
    if "flush_floor_cycles_per_s" in j:
        shown += (
            f" (flush floor {j['flush_floor_cycles_per_s']}/s at {j['flush_us']} µs a"
            f" flush; {j['single_to_floor']} of it"
        )
        if "round_trip_floor_cycles_per_s" in j:
            shown += (
                f"; with a {j['ping_us']} µs round trip per call"
                f" {j['round_trip_floor_cycles_per_s']}/s,"
                f" {j['single_to_round_trip_floor']} of it"
            )
        shown += ")"
    return shown + _durable_floor(j, "single", 3000), rate >= 3000


def holding_500(j: Json) -> tuple[str, bool]:
    shown = f"{j['holding_500_ratio']} ({j['holding_500_cycles_per_s']}/s)"
    return shown, j["holding_500_ratio"] >= 0.9


def contended(j: Json) -> tuple[str, bool]:
    rate, lost, fair = j["contended_cycles_per_s"], j["lost_updates"], j["max_over_median"]
    shown = f"{rate}/s, lost {lost}, max/median wait {fair}"
    if "contended_flushes_per_cycle" in j:
        shown += f", {j['contended_flushes_per_cycle']} flushes/cycle"
    if "contended_cpu_bound_cycles_per_s" in j:
        # What the CPU a cycle costs (wconfd + the 8 clients) allows on these cores.
        shown += (
            f", CPU/cycle {j['contended_server_cpu_us_per_cycle']} µs wconfd +"
            f" {j['contended_clients_cpu_us_per_cycle']} µs clients:"
            f" CPU bound {j['contended_cpu_bound_cycles_per_s']}/s"
        )
    return shown + _durable_floor(j, "contended", 3000), rate >= 3000 and lost == 0 and fair <= 20


def _durable_floor(j: Json, case: str, target: int) -> str:
    """The same clients against bench/_durable_floor.py's bare durable lock server, same
    run: what any server keeping lock rule 7 (durable before the answer) can at most reach here."""
    if f"durable_floor_{case}_cycles_per_s" not in j:
        return ""
    floor = j[f"durable_floor_{case}_cycles_per_s"]
    shown = f"; bare durable server {floor}/s, {j[f'{case}_to_durable_floor']} of it"
    shown += " (the target is above this floor)" if floor < target else ""
    if f"jsonrpc_floor_{case}_cycles_per_s" in j:
        rpc = j[f"jsonrpc_floor_{case}_cycles_per_s"]
        shown += f"; the same speaking JSON-RPC {rpc}/s, {j[f'{case}_to_jsonrpc_floor']} of it"
        shown += " (above this floor too)" if rpc < target else ""
    return shown


def death(j: Json) -> tuple[str, bool]:
    shown = f"p50 {j['p50_ms']} ms, p99 {j['p99_ms']} ms"
    return shown, j["p50_ms"] <= 5 and j["p99_ms"] <= 20


def get_config(j: Json) -> tuple[str, bool]:
    p50 = j["get_config_p50_ms"]["10000"]
    return f"p50 {p50} ms", p50 <= 30


def update_ratio(j: Json) -> tuple[str, bool]:
    return str(j["update_object_ratio"]), j["update_object_ratio"] <= 1.5


def growth_get_config(j: Json) -> tuple[str, bool]:
    g = j["get_config"]
    small, large = sorted(g["p50_ms"], key=int)
    shown = f"{g['ratio']}x: p50 {g['p50_ms'][large]} ms ({g['p50_ms'][small]} ms at {small})"
    if "memory_kept" in g:
        shown += f"; {g['memory_kept']['ratio']}x with the caller's freed memory kept"
    return shown, g["ratio"] <= g["target_ratio"]


def growth_update(j: Json) -> tuple[str, bool]:
    u = j["update_object"]
    small, large = sorted(u["p50_ms"], key=int)
    shown = f"{u['ratio']} (p50 {u['p50_ms'][large]} ms vs {u['p50_ms'][small]} ms at {small})"
    return shown, u["ratio"] <= u["target_ratio"]


def growth_restart(j: Json) -> tuple[str, bool]:
    r = j["restart"]
    small, large = sorted((k for k in r if k.isdigit()), key=int)
    big, parts = r[large], r[large]["parts"]
    shown = (
        f"{big['kill9_to_first_answer_s']} s ({r[small]['kill9_to_first_answer_s']} s at"
        f" {small}; in-process: snapshot decode {parts['snapshot_decode_s']} s, state"
        f" {parts['state_from_snapshot_s']} s, replay of {parts['journal_records']} records"
        f" {parts['replay_s']} s)"
    )
    return shown, big["kill9_to_first_answer_s"] <= r["target_s"]


def growth_failover(j: Json) -> tuple[str, bool]:
    f = j["failover"]
    small, large = sorted((k for k in f if k.isdigit()), key=int)
    shown = (
        f"max {f[large]['max_s']} s, p50 {f[large]['p50_s']} s ({f[small]['max_s']} s at {small})"
    )
    return shown, f[large]["max_s"] <= f["target_s"]


def submit_rate(j: Json) -> tuple[str, bool]:
    submit = j["submit"]
    shown = f"{submit['sequential_per_s']}/s sync ({submit['pipelined_64_per_s']}/s, 64 in flight"
    if "sequential_first_500_per_s" in submit:
        shown += f"; a fresh luxid's first 500: {submit['sequential_first_500_per_s']}/s"
    shown += ")"
    return shown, submit["sequential_per_s"] >= 2000


def cancel_rate(j: Json) -> tuple[str, bool]:
    return f"{j['cancel_per_s']}/s", j["cancel_per_s"] >= 2000


def submit_to_running(j: Json) -> tuple[str, bool]:
    p50 = j["submit_to_running"]["p50_ms"]
    return f"p50 {p50} ms", p50 <= 10


def burst(j: Json) -> tuple[str, bool]:
    # Judged by the opcode running (the stricter end), the process start shown beside.
    opexec, started = j["received_to_opexec_p50_ms"], j["received_to_started_p50_ms"]
    return f"p50 {opexec} ms (process started: {started} ms)", opexec <= 150


def end_to_end(j: Json) -> tuple[str, bool]:
    e2e = j["end_to_end"]
    cpu = ", ".join(f"{k} {v}" for k, v in e2e["cpu_ms_per_job"].items())
    shown = f"{e2e['jobs_per_s']}/s (CPU ms/job: {cpu})"
    if "process_floor" in j:
        # What one process per job costs before it does anything, and the ceiling it leaves.
        f = j["process_floor"]
        shown += (
            f"; a process that only forks and exits: {f['fork_ms']} + {f['child_ms']} ms,"
            f" ceiling with these daemons {f['ceiling_jobs_per_s']}/s"
        )
    return shown, e2e["jobs_per_s"] >= 300


def scheduling_pass(j: Json) -> tuple[str, bool]:
    cold, warm = j["pass"]["cold_pass_ms"], j["pass"]["warm_pass_ms"]
    return f"{cold} ms cold, {warm} ms warm", max(cold, warm) <= 100


def grown_pass(j: Json) -> tuple[str, bool]:
    grown, base = j["growth"], j["pass"]
    worst = max(grown["cold_pass_ms"], grown["warm_pass_ms"])
    shown = f"{worst} ms ({max(base['cold_pass_ms'], base['warm_pass_ms'])} ms at 10,000)"
    if "first_pass_ms" in grown:
        shown += f"; first pass after a start {grown['first_pass_ms']} ms"
    return shown, worst <= 500


def budget_pass(j: Json) -> tuple[str, bool]:
    p = j["pass"]
    cold, warm, plain = p["cold_pass_ms"], p["warm_pass_ms"], p["no_budgets_pass_ms"]
    return f"{cold} ms cold, {warm} ms warm ({plain} ms without)", max(cold, warm) <= 100


def rss(j: Json) -> tuple[str, bool]:
    mb = max(j["rss"]["rss_mb"], j["rss"]["rss_after_restart_mb"])
    return f"{mb} MB", mb <= 200


def drain(j: Json) -> tuple[str, bool]:
    seen, limit = j["max_concurrent_moves"], j["max_parallel"]
    shown = f"{j['complete_s']} s, at most {seen} at once"
    return shown, j["complete_s"] <= 15 and seen <= limit


def drain_budget(j: Json) -> tuple[str, bool]:
    b = j["budget"]
    shown = f"{b['complete_s']} s, at most {b['most_disrupted']} disrupted at once"
    return shown, b["complete_s"] <= 15 and b["most_disrupted"] <= b["max_disrupted"]


def drain_deadline(j: Json) -> tuple[str, bool]:
    late = j["deadline_delay_ms"]
    return f"max {late['max']} ms (median {late['median']})", late["max"] <= 100


def drain_plan(j: Json) -> tuple[str, bool]:
    stub, core = j["stub"], j["core"]
    shown = f"p99 {stub['p99_ms']} ms (p50 {stub['p50_ms']}; the planner alone {core['p50_ms']})"
    return shown, stub["p99_ms"] <= j["target_ms"]


def why_job(j: Json) -> tuple[str, bool]:
    waiting, queued = j["waiting"]["p50_ms"], j["queued"]["p50_ms"]
    shown = f"p50 {waiting} ms for a job waiting for a lock, {queued} ms for a queued one"
    return shown, max(waiting, queued) <= 2


def event_latency(j: Json) -> tuple[str, bool]:
    lat = j["latency"]
    return f"p99 {lat['p99_ms']} ms (p50 {lat['p50_ms']})", lat["p99_ms"] <= 50


def event_submits(j: Json) -> tuple[str, bool]:
    sub = j["submits"]
    pinned = "luxid on its own core" if sub.get("luxid_pinned") else "unpinned"
    shown = (
        f"{sub['with_per_s']}/s vs {sub['without_per_s']}/s (ratio {sub['ratio']}, {pinned}; "
        f"unpinned {sub.get('ratio_unpinned', '-')})"
    )
    return shown, sub["ratio"] >= 0.85


def event_lock_cycles(j: Json) -> tuple[str, bool]:
    lk = j["lock_cycles"]
    shown = f"{lk['with_one_subscriber_per_s']}/s vs {lk['without_per_s']}/s (ratio {lk['ratio']})"
    return shown, lk["ratio"] >= 0.97 and lk["events_written"] == 0


def ha_failover(j: Json) -> tuple[str, bool]:
    f = j["failover_kill9_to_first_answer"]
    shown = f"p50 {f['p50_s']} s, max {f['max_s']} s, lost {f['acknowledged_writes_lost']}"
    return shown, f["max_s"] <= 5 and f["acknowledged_writes_lost"] == 0


def stall_write_gap(j: Json) -> tuple[str, bool]:
    gaps = j["etcd_leader_stall_5s"]["longest_write_gap_s"]
    return f"max {max(gaps)} s over {len(gaps)} runs", max(gaps) <= 3


def stall_kept(j: Json) -> tuple[str, bool]:
    s = j["etcd_leader_stall_5s"]
    return f"{s['master_and_term_kept']} of {s['runs']}", s["master_and_term_kept"] >= s["runs"] - 1


def stall_luxid(j: Json) -> tuple[str, bool]:
    took, lost = j["master_luxid_stall_15s"]["submission_elsewhere_s"], j["acknowledged_jobs_lost"]
    return f"max {max(took)} s, lost {lost}", max(took) <= 8 and lost == 0


def ha_lock_cycles(j: Json) -> tuple[str, bool]:
    # The rate of the cluster (8 clients: group commit shares transactions); one sync
    # client beside it, with its floor: two etcd transactions one after the other.
    etcd, floor = j["lock_cycles_per_s"]["etcd"], j["etcd_one_client_floor"]
    shown = (
        f"{etcd['8_clients']}/s with 8 clients (one client {etcd['one_client']}/s; its floor,"
        f" two transactions in a row, {floor['floor_cycles_per_s']}/s)"
    )
    return shown, etcd["8_clients"] >= 300


def tls_lock_cycles(j: Json) -> tuple[str, bool]:
    # Beside the same run's plain etcd: what TLS, client certificates and etcd's auth cost.
    tls, plain = (j[k]["lock_cycles_per_s"] for k in ("tls_client_cert_and_auth", "plain"))
    shown = (
        f"{tls['8_clients']}/s with 8 clients (plain etcd in the same run {plain['8_clients']}/s)"
    )
    return shown, tls["8_clients"] >= 300


def tls_submits(j: Json) -> tuple[str, bool]:
    tls, plain = (j[k]["submit_job_per_s"] for k in ("tls_client_cert_and_auth", "plain"))
    shown = (
        f"{tls['pipelined_64_per_s']}/s with 64 in flight (plain etcd in the same run"
        f" {plain['pipelined_64_per_s']}/s)"
    )
    return shown, tls["pipelined_64_per_s"] >= 300


def ha_submits(j: Json) -> tuple[str, bool]:
    etcd = j["etcd"]
    shown = (
        f"{etcd['pipelined_64_per_s']}/s with 64 in flight ({etcd['sequential_per_s']}/s"
        f" sequential; {etcd['end_to_end_per_s']} jobs/s end to end)"
    )
    return shown, etcd["pipelined_64_per_s"] >= 300


def big_frame(j: Json) -> tuple[str, bool]:
    worst = max(j[case]["ping_max_ms"] for case in ("unknown_method", "ping_with_params"))
    p99 = max(j[case]["ping_p99_ms"] for case in ("unknown_method", "ping_with_params"))
    return f"max {worst} ms (p99 {p99} ms)", worst <= j["target_ping_max_ms"]


def audit_cost(name: str) -> Callable[[Json], tuple[str, bool]]:
    def measure(j: Json) -> tuple[str, bool]:
        ratio = j["ratio"][name]
        shown = f"{ratio} ({j['audited'][name]}/s vs {j['not_audited'][name]}/s)"
        return shown, ratio >= j["target_ratio"]

    return measure


def luxid_restart_1m(j: Json) -> tuple[str, bool]:
    # kill -9 -> first answer and RSS at 1,000,000 jobs, the 10,000 figures beside.
    big, small = j["jobs"]["big"], j["jobs"]["small"]
    rss = max(big["rss_mb"], big["restart"]["rss_after_mb"])
    shown = (
        f"{big['restart']['kill_to_answer_s']} s, RSS {rss} MB (at 10,000 jobs:"
        f" {small['restart']['kill_to_answer_s']} s,"
        f" {max(small['rss_mb'], small['restart']['rss_after_mb'])} MB)"
    )
    return shown, big["restart"]["kill_to_answer_s"] <= 3 and rss <= 300


def luxid_submit_growth(j: Json) -> tuple[str, bool]:
    jobs = j["jobs"]
    ratio, first, last = jobs["submit_ratio"], jobs["submit_first"], jobs["submit_last"]
    shown = (
        f"{ratio['pipelined_64_per_s']} with 64 in flight ({last['pipelined_64_per_s']}/s vs"
        f" {first['pipelined_64_per_s']}/s); sync {ratio['sync_per_s']}"
        f" ({last['sync_per_s']}/s vs {first['sync_per_s']}/s)"
    )
    return shown, min(ratio.values()) >= 0.9


def luxid_query_1m(j: Json) -> tuple[str, bool]:
    big, small = j["jobs"]["big"], j["jobs"]["small"]
    archived, queued = big["query_archived"]["p50_ms"], big["query_queued"]["p50_ms"]
    shown = (
        f"p50 {archived} ms archived, {queued} ms queued (at 10,000 jobs:"
        f" {small['query_archived']['p50_ms']} ms, {small['query_queued']['p50_ms']} ms)"
    )
    return shown, max(archived, queued) <= 2


def drain_10k(j: Json) -> tuple[str, bool]:
    d = j["drain"]
    big, small = d["big"], d["small"]
    shown = (
        f"{big['complete_s']} s, at most {big['max_concurrent_moves']} at once"
        f" ({small['instances']} instances: {small['complete_s']} s)"
    )
    return shown, big["complete_s"] <= 150 and big["max_concurrent_moves"] <= d["max_parallel"]


ROWS = [
    Row("ping round trips/s vs bare echo server", "rpc_roundtrip", ping_ratio, "ratio ≥ 0.7"),
    Row("lock cycles/s, one client, durable", "locks", lock_cycles, "≥ 3,000/s"),
    Row("the same holding 500 other locks", "locks", holding_500, "≥ 0.9 x the above"),
    Row("lock cycles/s, 8 processes, 4 locks", "locks", contended,
        "≥ 3,000/s, no lost update, max wait ≤ 20x median"),
    Row("dead holder → waiter granted", "death", death, "p50 ≤ 5 ms, p99 ≤ 20 ms"),
    Row("get_config, 10,000 instances, stub", "config", get_config, "p50 ≤ 30 ms"),
    Row("update_object 10,000 vs 10 instances", "config", update_ratio, "ratio ≤ 1.5"),
    Row("get_config, 100,000 instances, stub", "growth_wconfd", growth_get_config,
        "≤ 10 x the 10,000 figure"),
    Row("update_object 100,000 vs 10 instances", "growth_wconfd", growth_update,
        "ratio ≤ 1.5"),
    Row("wconfd kill -9 → first answer, 100,000 instances + 100,000 journal records",
        "growth_wconfd", growth_restart, "≤ 3 s"),
    Row("submit_job rate, one client", "queue", submit_rate, "≥ 2,000/s"),
    Row("cancel_job of queued jobs, one client", "cancel", cancel_rate, "≥ 2,000/s"),
    Row("submit → running, idle queue", "queue", submit_to_running, "p50 ≤ 10 ms"),
    Row("100 jobs at once: received → started", "burst", burst, "p50 ≤ 150 ms"),
    Row("end-to-end OP_TEST_DELAY(0), 20 running", "job_life", end_to_end, "≥ 300 jobs/s"),
    Row("scheduling pass, 1,000 filters, 10,000 queued", "filters", scheduling_pass,
        "≤ 100 ms"),
    Row("scheduling pass, 1,000 filters, 100,000 queued", "filters", grown_pass, "≤ 500 ms"),
    Row("scheduling pass, 100 budgets, 10,000 instances, 10,000 queued", "budgets",
        budget_pass, "≤ 100 ms"),
    Row("luxid RSS, 100,000 archived jobs", "queue", rss, "≤ 200 MB"),
    Row("luxid kill -9 → first answer, 1,000,000 jobs (990,000 archived, 10,000 queued)",
        "growth_luxid", luxid_restart_1m, "≤ 3 s; RSS ≤ 300 MB"),
    Row("submit_job/s, jobs 990,000-1,000,000 vs the first 10,000", "growth_luxid",
        luxid_submit_growth, "ratio ≥ 0.9"),
    Row("query_jobs of one job by id, 1,000,000 jobs", "growth_luxid", luxid_query_1m,
        "p50 ≤ 2 ms"),
    Row("node drain, 1,000 instances, max_parallel 20", "drain", drain,
        "≤ 15 s, never > 20 at once"),
    Row("node drain, 1,000 instances in a budget of 20, max_parallel 50", "drain",
        drain_budget, "≤ 15 s, never > 20 disrupted"),
    Row("node drain, 10,000 instances, max_parallel 100", "growth_luxid", drain_10k,
        "≤ 150 s, never > 100 at once"),
    Row("drain deadline fired", "drain", drain_deadline, "≤ 100 ms late"),
    Row("drain plan, 1,000 instances, through the stub", "drain_plan", drain_plan, "≤ 200 ms"),
    Row("why_job, 1,000 queued jobs, 500 locks held", "why_job", why_job, "p50 ≤ 2 ms"),
    Row("event latency, durable → SSE subscriber", "events", event_latency, "p99 ≤ 50 ms"),
    Row("submit_job/s, 100 subscribers vs none", "events", event_submits, "≥ 0.85 x"),
    Row("lock cycles/s, one other-topic subscriber vs none", "events", event_lock_cycles,
        "≥ 0.97 x"),
    Row("ping beside 15 MiB frames on another connection", "big_frame", big_frame,
        "every ping ≤ 50 ms"),
    Row("submit_job/s audited vs --no-audit, one client", "audit",
        audit_cost("submit_job_per_s"), "≥ 0.9 x"),
    Row("submit_job/s audited vs --no-audit, 64 in flight", "audit",
        audit_cost("submit_job_64_in_flight_per_s"), "≥ 0.9 x"),
    Row("update_object/s audited vs --no-audit, one client", "audit",
        audit_cost("update_object_per_s"), "≥ 0.9 x"),
    Row("etcd failover: kill -9 → first answer", "ha", ha_failover, "≤ 5 s, nothing lost"),
    Row("lock cycles/s on etcd", "ha", ha_lock_cycles, "≥ 300/s"),
    Row("etcd failover with 100,000 instances: kill -9 → first answer", "growth_wconfd",
        growth_failover, "≤ 8 s"),
    Row("submit_job/s on etcd", "ha_luxid", ha_submits, "≥ 300/s"),
    Row("etcd leader stalled 5 s: longest write gap", "ha_stalls", stall_write_gap, "≤ 3 s"),
    Row("etcd leader stalled 5 s: master and term kept", "ha_stalls", stall_kept,
        "≥ 5 of 6 runs"),
    Row("master's luxid stalled 15 s: submissions elsewhere", "ha_stalls", stall_luxid,
        "≤ 8 s, nothing lost"),
    Row("lock cycles/s on etcd, TLS + client cert + auth", "etcd_tls", tls_lock_cycles,
        "≥ 300/s"),
    Row("submit_job/s on etcd, TLS + client cert + auth", "etcd_tls", tls_submits, "≥ 300/s"),
]  # fmt: skip


def scripts(every: bool) -> list[str]:
    """The scripts of the table's rows present, in PLAN's order; with `every`, then all others by
    name."""
    present = sorted(p.stem for p in BENCH.glob("*.py") if not p.stem.startswith("_"))
    present.remove("report")
    others = [s for s in present if s not in PLAN] if every else []
    return [s for s in PLAN if s in present] + others


def parse(stdout: str) -> Json | None:
    """The script's JSON: its whole output, or else its last line that is one object."""
    with contextlib.suppress(ValueError):
        value = json.loads(stdout)
        if isinstance(value, dict):
            return value
    for line in reversed(stdout.splitlines()):
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                return value
    return None


def run(script: str, out: Path) -> Json:
    """Run one script; its JSON, or {"error": why} (stored either way).

    Its output goes to files, not pipes, and only the script itself is waited for: a job
    process of the script's stack may outlive it (jobs ride out a lost luxid for their
    patience) and would hold a pipe open long after the script printed its figures.
    """
    args, limit = PLAN.get(script, ([], DEFAULT_LIMIT))
    started = time.monotonic()
    with tempfile.TemporaryFile("w+") as stdout, tempfile.TemporaryFile("w+") as stderr:
        proc = subprocess.Popen(
            [sys.executable, str(BENCH / f"{script}.py"), *args], stdout=stdout, stderr=stderr
        )
        try:
            code = proc.wait(timeout=limit)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            code = None
        stdout.seek(0)
        stderr.seek(0)
        printed, errors = stdout.read(), stderr.read()
    result = parse(printed)
    if code is None:
        result = {"error": f"timed out after {limit:.0f} s"}
    elif code != 0 or result is None:
        tail = (errors or printed).strip().splitlines()[-3:]
        result = {"error": f"exit {code}: " + " / ".join(tail)}
    result["bench_seconds"] = round(time.monotonic() - started, 1)
    (out / f"{script}.json").write_text(json.dumps(result) + "\n")
    return result


def table(results: dict[str, Json]) -> list[list[str]]:
    """The performance targets' rows as [figure, measured, target, met?]."""
    rows = []
    for row in ROWS:
        result = results.get(row.script)
        if result is None:
            measured, met = f"not measured (no bench/{row.script}.py run)", "—"
        elif "error" in result:
            measured, met = f"{row.script}.py failed: {result['error'][:120]}", "—"
        else:
            try:
                shown, ok = row.measure(result)
                measured, met = shown, "yes" if ok else "NO"
            except (KeyError, TypeError) as exc:
                measured, met = f"{row.script}.py gave no {exc}", "—"
        rows.append([row.figure, measured, row.target, met])
    return rows


def render(rows: list[list[str]]) -> str:
    """A Markdown table."""
    header = ["figure", "measured", "target", "met?"]
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(cell.replace("|", "/") for cell in r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--out", type=Path, default=Path(".lw/bench"), help="JSON directory")
    parser.add_argument("--only", default="", help="comma-separated scripts to run")
    parser.add_argument("--all", action="store_true", help="also the scripts of no table row")
    parser.add_argument("--table-only", action="store_true", help="run nothing; re-print")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    results: dict[str, Json] = {}
    if args.table_only:
        for path in sorted(args.out.glob("*.json")):
            results[path.stem] = json.loads(path.read_text())
    else:
        wanted = [s for s in args.only.split(",") if s] or scripts(args.all)
        for script in wanted:
            print(f"== bench/{script}.py", flush=True)
            results[script] = run(script, args.out)
            print(json.dumps(results[script]), flush=True)
    print()
    print(render(table(results)))


if __name__ == "__main__":
    main()
