"""Lock throughput (docs/contracts.md#performance-targets): durable acquire+release cycles/s.

1. One client, distinct locks: each cycle is try_update_locks(acquire) then
   try_update_locks(release), both journalled before the answer (target >= 3,000/s);
   and the same while the client holds 500 other locks (lock rule 7,
   docs/contracts.md#lock-rules: the journal cost grows with the change, so target >= 0.9 x
   without, measured alternately in the same run).
2. Eight client processes contending on four locks with update_locks_waiting: aggregate
   cycles/s (target >= 3,000/s), no lost update (each lock guards a counter file the
   holder increments), fairness: max wait <= 20x the median wait; and how many journal
   flushes a cycle took (group commit: concurrent changes share one RWF_DSYNC write,
   so well under 1 when the clients overlap), read from wconfd's own flush counter;
   and the CPU a cycle costs in wconfd and in the clients, with the rate that CPU allows
   on this machine's cores (`contended_cpu_bound_cycles_per_s`: what the contended
   figure is bound by when the disk is not).

The disk floor is measured in the same run, alternating with (1), on the state
directory's disk: one RWF_DSYNC write of a lock record into preallocated space
(`flush_us`).  Lock rule 7 makes every change durable before its answer, and a
sync client's cycle is two answered calls, so no sync client can exceed
1e6 / (2 * flush_us) cycles/s (`flush_floor_cycles_per_s`); `single_to_floor` says how
close to that floor the measured rate is (the rest is CPU and transport).  Each call also
makes a round trip, at least a `ping`'s (`ping_us`, the same client, same alternations),
so `round_trip_floor_cycles_per_s` = 1e6 / (2 * (flush_us + ping_us)) is what a sync
client could reach if the lock work itself cost nothing.

Those two floors are sums of parts timed apart.  The measured floor runs the same client
loops against a bare durable lock server (bench/_durable_floor.py: rule 7's write before
each answer and nothing else, on the same disk, in the same run):
`durable_floor_single_cycles_per_s` (alternated with (1)) and
`durable_floor_contended_cycles_per_s` (the eight workers right after (2)), and how
close wconfd comes to each (`single_to_durable_floor`, `contended_to_durable_floor`).
Where the bare server itself stays below a target, no server keeping rule 7 meets it on
this machine.  The one-client loop also runs against the bare server speaking the
JSON-RPC 2.0 of docs/contracts.md#wire-protocol (`jsonrpc_floor_single_cycles_per_s`,
`single_to_jsonrpc_floor`): rule 7 and the documented wire format, nothing else.
"""

from __future__ import annotations

import json
import os
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# This folder (first on sys.path) holds queue.py: put it last so the stdlib's queue wins;
# _util is still found here.
sys.path.append(sys.path.pop(0))

import _durable_floor as durable_floor
import psutil
from _util import daemon, per_call_us

from client import WConfdClient
from wconfd.storage.fileops import FileOps
from wconfd.storage.journal_format import encode_frame

SINGLE_SECONDS = 3.0
HELD = 500
ALTERNATIONS = 3
CONTENDED_SECONDS = 5.0
WORKERS = 8
LOCKS = 4


def flush_us(directory: Path, rounds: int = 500) -> float:
    """Median of 5 batches of one RWF_DSYNC write of a lock-record-sized frame into
    preallocated, synced space in `directory`, in microseconds: the disk's part of
    every durable lock call."""
    ops = FileOps()
    path = directory / "flush-floor.bin"
    fd = ops.open(str(path), os.O_RDWR | os.O_CREAT)
    try:
        ops.pwrite(fd, bytes(1 << 20), 0)
        ops.fsync(fd)
        frame = encode_frame(b"x" * 60, 1, 1)
        pos = 0
        batches = []
        for _ in range(5):
            t0 = time.perf_counter()
            for _ in range(rounds // 5):
                ops.pwrite_dsync(fd, frame, pos)
                pos = (pos + len(frame)) % (1 << 19)
            batches.append((time.perf_counter() - t0) / (rounds // 5))
        return statistics.median(batches) * 1e6
    finally:
        ops.close(fd)
        path.unlink()


class _StubLoop:
    """A WConfdClient as the lock loop's client (durable_floor.LockLoopClient)."""

    def __init__(self, client: WConfdClient) -> None:
        self.client = client

    def acquire(self, lock: str) -> None:
        self.client.try_update_locks([[lock, "exclusive"]])

    def release(self, lock: str) -> None:
        self.client.try_update_locks([[lock, "release"]])


def cycles_per_s(client: WConfdClient, seconds: float) -> float:
    """Acquire+release cycles per second on distinct node locks: the bare server's loop
    (durable_floor.cycles_per_s), through the stub."""
    return durable_floor.cycles_per_s(_StubLoop(client), seconds)


def single_client(socket: Path, state: Path, floor_socket: Path) -> dict[str, float]:
    """One client's cycles/s without and while holding 500 other locks (instance
    locks, before node in lock order), alternated so both see the same disk load; the
    flush floor on the state directory's disk and the bare durable server's cycles/s
    (`floor_socket`) measured between them."""
    held = [[f"instance/h{i:04d}", "exclusive"] for i in range(HELD)]
    part = SINGLE_SECONDS / ALTERNATIONS
    without: list[float] = []
    holding: list[float] = []
    flushes: list[float] = []
    pings: list[float] = []
    bare: list[float] = []
    rpc: list[float] = []
    bare_client = durable_floor.BareLockClient(floor_socket)
    rpc_client = durable_floor.JsonRpcLockClient(floor_socket)
    with WConfdClient(socket, name="bench") as client:
        client.ping()
        for _ in range(ALTERNATIONS):
            without.append(cycles_per_s(client, part))
            flushes.append(flush_us(state))
            pings.append(per_call_us(client.ping))  # transport, dispatch: no lock work
            bare.append(durable_floor.cycles_per_s(bare_client, part))
            rpc.append(durable_floor.cycles_per_s(rpc_client, part))
            assert client.try_update_locks(held) == []
            holding.append(cycles_per_s(client, part))
            client.free_locks()
    bare_client.close()
    rpc_client.close()
    a, b = statistics.median(without), statistics.median(holding)
    durable, durable_rpc = statistics.median(bare), statistics.median(rpc)
    flush = statistics.median(flushes)
    floor = 1e6 / (2 * flush)
    ping = statistics.median(pings)
    round_trip_floor = 1e6 / (2 * (flush + ping))
    return {
        "single_client_cycles_per_s": round(a),
        "flush_us": round(flush, 1),
        "flush_floor_cycles_per_s": round(floor),
        "single_to_floor": round(a / floor, 3),
        "ping_us": round(ping, 1),
        "round_trip_floor_cycles_per_s": round(round_trip_floor),
        "single_to_round_trip_floor": round(a / round_trip_floor, 3),
        "durable_floor_single_cycles_per_s": round(durable),
        "single_to_durable_floor": round(a / durable, 3),
        "jsonrpc_floor_single_cycles_per_s": round(durable_rpc),
        "single_to_jsonrpc_floor": round(a / durable_rpc, 3),
        "holding_500_cycles_per_s": round(b),
        "holding_500_ratio": round(b / a, 3),
    }


def journal_flushes(socket: Path) -> int:
    """How many journal writes (each one RWF_DSYNC flush) wconfd has made so far."""
    with WConfdClient(socket, name="bench-metrics") as client:
        return int(client.get_metrics()["lockwarden_journal_flush_seconds_count"])


def worker(socket: str, counters: str, seconds: float, seed: int, bare: bool) -> None:
    """One contending process: lock a random lock, bump its counter, release; report.
    `bare`: against the bare durable server (bench/_durable_floor.py) instead of wconfd.

    It connects, says `ready` and waits for the parent's `go` line, so that all eight
    contend over the same window (started one by one, the first ran alone while the
    others were still importing, and the aggregate was divided by a longer time).  Once
    its time is up it says `done` and reports only on the parent's `report` line: the
    last cycles of one worker must not wait behind the others encoding their reports and
    exiting (that made the longest waits, and so the fairness ratio, a teardown figure)."""
    rng = random.Random(seed)
    acquire, release = _lock_calls(socket, seed, bare)
    counter_fds = [os.open(Path(counters) / f"c{n}", os.O_RDWR) for n in range(LOCKS)]
    waits: list[float] = []
    cycles = 0
    print("ready", flush=True)
    sys.stdin.readline()
    cpu = resource.getrusage(resource.RUSAGE_SELF)
    start = time.monotonic()
    end = start + seconds
    while time.monotonic() < end:
        n = rng.randrange(LOCKS)
        lock = f"node/n{n}"
        t0 = time.perf_counter()
        acquire(lock)
        waits.append(time.perf_counter() - t0)
        _bump(counter_fds[n])
        release(lock)
        cycles += 1
    now = resource.getrusage(resource.RUSAGE_SELF)
    cpu_s = now.ru_utime + now.ru_stime - cpu.ru_utime - cpu.ru_stime
    elapsed = time.monotonic() - start
    print("done", flush=True)
    sys.stdin.readline()
    print(json.dumps({"cycles": cycles, "waits": waits, "cpu_s": cpu_s, "elapsed": elapsed}))


def _bump(fd: int) -> None:
    """Read-modify-write the counter in `fd` in place: two holders overlapping would lose
    an increment (the lost-update check).  In place, not truncated and rewritten: a
    truncate makes ext4 free and allocate the file's block inside the critical section,
    which then measured the file system more than the locks (the clients' CPU per cycle
    was 300 µs with it, 110 µs without)."""
    os.pwrite(fd, b"%20d" % (int(os.pread(fd, 20, 0)) + 1), 0)


def _lock_calls(
    socket: str, seed: int, bare: bool
) -> tuple[Callable[[str], object], Callable[[str], object]]:
    """A connected worker's blocking acquire(lock) and release(lock)."""
    if bare:
        bare_client = durable_floor.BareLockClient(socket)
        return bare_client.acquire, bare_client.release
    client = WConfdClient(socket, name=f"w{seed}")
    client.ping()

    def acquire(lock: str) -> None:
        assert client.update_locks_waiting([[lock, "exclusive"]]).granted

    def release(lock: str) -> None:
        client.try_update_locks([[lock, "release"]])

    return acquire, release


def daemon_process(socket: Path) -> psutil.Process:
    """The wconfd serving `socket` (started by bench._util.daemon with its run dir)."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any("lw-wconfd" in a for a in cmdline) and str(socket.parent) in cmdline:
            return proc
    raise LookupError(f"no lw-wconfd serves {socket}")


def cpu_seconds(proc: psutil.Process) -> float:
    times = proc.cpu_times()
    return float(times.user + times.system)


def _run_workers(
    socket: Path, bare: bool, at_go: Callable[[], object]
) -> tuple[list[dict[str, Any]], int]:
    """WORKERS contending processes against `socket` (the bare server's if `bare`),
    started together right after `at_go()`; their reports and the counters' sum."""
    with tempfile.TemporaryDirectory() as counters:
        for n in range(LOCKS):
            (Path(counters) / f"c{n}").write_text("0")
        procs = [
            subprocess.Popen(
                [
                    *(sys.executable, __file__, "--worker", str(socket), counters),
                    *(str(CONTENDED_SECONDS), str(seed), "bare" if bare else "wconfd"),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                text=True,
            )
            for seed in range(WORKERS)
        ]
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == "ready\n"
        at_go()
        _tell(procs, "go")  # all are connected: start them together
        for p in procs:
            assert p.stdout is not None and p.stdout.readline() == "done\n"
        _tell(procs, "report")  # all are done: now they may report and exit
        reports = [json.loads(p.communicate()[0]) for p in procs]
        total = sum(int((Path(counters) / f"c{n}").read_text()) for n in range(LOCKS))
    return reports, total


def _tell(procs: list[subprocess.Popen[str]], line: str) -> None:
    """Write `line` to every worker."""
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(line + "\n")
        p.stdin.flush()


def _rate(reports: list[dict[str, Any]]) -> float:
    """Aggregate cycles/s: each worker ran CONTENDED_SECONDS from its `go`, give or take
    its last cycle."""
    return sum(r["cycles"] for r in reports) / statistics.mean(r["elapsed"] for r in reports)


def contended(socket: Path, floor_socket: Path) -> dict[str, float]:
    """Eight processes on four locks: aggregate rate, lost updates, fairness, flushes
    and CPU per cycle; then the same workers against the bare durable server."""
    server = daemon_process(socket)
    before: dict[str, float] = {}

    def mark() -> None:
        before["flushes"] = journal_flushes(socket)
        before["cpu"] = cpu_seconds(server)

    reports, total = _run_workers(socket, False, mark)
    server_cpu = cpu_seconds(server) - before["cpu"]
    flushes = journal_flushes(socket) - before["flushes"]
    bare_reports, bare_total = _run_workers(floor_socket, True, lambda: None)
    bare_cycles = sum(r["cycles"] for r in bare_reports)
    assert bare_total == bare_cycles, "the bare durable server lost updates"
    cycles = sum(r["cycles"] for r in reports)
    server_us = server_cpu / cycles * 1e6
    clients_us = sum(r["cpu_s"] for r in reports) / cycles * 1e6
    waits = [w for r in reports for w in r["waits"]]
    median = statistics.median(waits)
    rate, floor = _rate(reports), _rate(bare_reports)
    return {
        "contended_cycles_per_s": round(rate),
        "lost_updates": cycles - total,
        "wait_median_ms": round(median * 1000, 3),
        "wait_max_ms": round(max(waits) * 1000, 3),
        "max_over_median": round(max(waits) / median, 1),
        "contended_flushes_per_cycle": round(flushes / cycles, 3),
        "contended_server_cpu_us_per_cycle": round(server_us, 1),
        "contended_clients_cpu_us_per_cycle": round(clients_us, 1),
        "contended_cpu_bound_cycles_per_s": round(
            len(os.sched_getaffinity(0)) * 1e6 / (server_us + clients_us)
        ),
        "durable_floor_contended_cycles_per_s": round(floor),
        "contended_to_durable_floor": round(rate / floor, 3),
    }


def main() -> None:
    with daemon("wconfd") as (run, state), durable_floor.bare_server() as floor_socket:
        socket = run / "wconfd.sock"
        single = single_client(socket, state, floor_socket)
        many = contended(socket, floor_socket)
    print(
        json.dumps(
            {
                "bench": "locks",
                **single,
                "target_single": 3000,
                "target_holding_500_ratio": 0.9,
                **many,
                "target_contended": 3000,
                "target_max_over_median": 20,
            }
        )
    )


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        worker(
            sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5]), sys.argv[6] == "bare"
        )
    else:
        main()
