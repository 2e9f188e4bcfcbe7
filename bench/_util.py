"""Helpers shared by the bench scripts: temp dirs, starting daemons, statistics."""

from __future__ import annotations

import contextlib
import http.client
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from client import LuxiClient, WConfdClient
from client.vocabulary import FINALIZED_STATUSES

BIN = Path(sys.executable).parent


def wait_for_socket(path: Path, proc: subprocess.Popen[bytes], timeout: float = 15.0) -> None:
    """Block until something accepts connections on `path` (or the process died)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{proc.args} exited with {proc.returncode}")
        with contextlib.suppress(OSError), socket.socket(socket.AF_UNIX) as sock:
            sock.connect(str(path))
            return
        time.sleep(0.02)
    raise TimeoutError(f"nothing listens on {path}")


@contextlib.contextmanager
def daemon(
    name: str, *extra: str, base: Path | None = None, stderr: IO[bytes] | None = None
) -> Iterator[tuple[Path, Path]]:
    """Run `lw-<name>` on temporary dirs; yields (run_dir, state_dir).

    `stderr`: where the daemon's log goes (and its job processes', for luxid)."""
    with contextlib.ExitStack() as stack:
        root = base or Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="lwbench-")))
        run, state = root / "run", root / "state"
        proc = subprocess.Popen(
            [
                str(BIN / f"lw-{name}"),
                "--run-dir",
                str(run),
                "--state-dir",
                str(state),
                "--log-level",
                "WARNING",
                *extra,
            ],
            stderr=stderr,
        )
        try:
            wait_for_socket(run / f"{name}.sock", proc)
            yield run, state
        finally:
            proc.terminate()
            proc.wait(10)


def free_port() -> int:
    """A TCP port free on the loopback interface right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def rapi(run: Path, state: Path, *extra: str) -> Iterator[http.client.HTTPConnection]:
    """`lw-rapi` on a free port for the daemons of `run`; a keep-alive connection to it
    once it answers `GET /version`."""
    port = free_port()
    proc = subprocess.Popen(
        [str(BIN / "lw-rapi"), "--run-dir", str(run), "--state-dir", str(state),
         "--port", str(port), "--log-level", "WARNING", *extra],
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
                conn.request("GET", "/version")
                conn.getresponse().read()
                break
            except OSError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise
                time.sleep(0.05)
        try:
            yield conn
        finally:
            conn.close()
    finally:
        proc.terminate()
        proc.wait(10)


def per_call_us(fn: Callable[[], Any], rounds: int = 2000) -> float:
    """Median of 5 batches of the mean time of `fn` in microseconds."""
    batches = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(rounds // 5):
            fn()
        batches.append((time.perf_counter() - t0) / (rounds // 5))
    return statistics.median(batches) * 1e6


def summary(samples: list[float]) -> dict[str, float]:
    """Median, p99 and max of latency samples in milliseconds."""
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
        "max_ms": round(ordered[-1] * 1000, 3),
    }


def failover_summary(times: list[float], ttl: float) -> dict[str, float]:
    """Failover trials: their number, p50 and max against the 5 s target."""
    return {
        "trials": len(times),
        "ttl_s": ttl,
        "p50_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "target_max_s": 5.0,
    }


def cpu_count() -> int:
    """Cores available to this process."""
    return len(os.sched_getaffinity(0))


def set_max_running(run: Path, n: int) -> None:
    """Set the cluster's max_running_jobs through wconfd (holding the BGL, as jobs do)."""
    with WConfdClient(run / "wconfd.sock", name="bench") as wc:
        wc.update_locks_waiting([["cluster/BGL", "exclusive"]], timeout=30)
        cluster = wc.get_object("cluster")
        cluster["max_running_jobs"] = n
        wc.update_object("cluster", cluster)
        wc.free_locks()


def wait_final(lc: LuxiClient, job_id: int) -> str:
    """Follow a job until it is finalized; its status."""
    prev = None
    while True:
        change = lc.wait_for_job_change(
            job_id=job_id, fields=["status"], prev_values=prev, prev_log_serial=10**9,
            timeout=60,
        )  # fmt: skip
        if change == "nochange":
            continue
        prev = change.values
        if prev[0] in FINALIZED_STATUSES:
            return str(prev[0])
