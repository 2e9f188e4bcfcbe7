"""Helpers of the luxid bench scripts (queue, cancel, burst, events): a wconfd + luxid
stack on a temporary directory, the fsync floor of this disk, pipelined submits, and
following jobs to their end."""

from __future__ import annotations

import asyncio
import contextlib
import sqlite3
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
from _util import daemon

from client import AsyncLuxiClient

DELAY0 = {"OP_ID": "OP_TEST_DELAY", "duration": 0}
PAUSE_ALL = {"priority": 0, "predicates": [], "action": "PAUSE", "reason": []}
REJECT_ALL = {"priority": 0, "predicates": [], "action": "REJECT", "reason": []}


def pipelined_submit_rate(
    socket: Path, seconds: float = 0.0, in_flight: int = 64, count: int = 0
) -> float:
    """submit_job/s of one asyncio client keeping `in_flight` calls of a DELAY0 job going
    for `seconds`, or (`count` > 0) for exactly `count` submits."""

    async def go() -> float:
        client = AsyncLuxiClient(socket, timeout=600)
        started = done = 0
        stop = time.perf_counter() + seconds

        def more() -> bool:
            return started < count if count else time.perf_counter() < stop

        async def worker() -> None:
            nonlocal started, done
            while more():
                started += 1
                await client.submit_job(ops=[DELAY0])
                done += 1

        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        elapsed = time.perf_counter() - t
        await client.close()
        return done / elapsed

    return asyncio.run(go())


def fsync_ms(directory: Path, commits: int = 200) -> dict[str, float]:
    """Median cost of one small SQLite WAL commit with synchronous=FULL on this disk, in
    milliseconds: `fsync_commit_ms` once the WAL has been checkpointed and is written
    over again (what a running luxid pays), and `fsync_commit_fresh_ms` while a fresh
    WAL still grows (the first ~1,000 pages after luxid starts: each commit then also
    makes the file system commit the file's new size, about twice the cost here)."""
    path = directory / "fsync-probe.sqlite"
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("CREATE TABLE t (x BLOB)")

    def median_ms(rounds: int) -> float:
        samples = []
        for _ in range(rounds):
            t = time.perf_counter()
            conn.execute("BEGIN IMMEDIATE")
            conn.execute("INSERT INTO t VALUES (?)", (b"x" * 300,))
            conn.execute("COMMIT")
            samples.append(time.perf_counter() - t)
        return round(statistics.median(samples) * 1000, 3)

    try:
        fresh = median_ms(commits)
        wal, size = Path(f"{path}-wal"), -1
        while wal.stat().st_size != size:  # it grows until the automatic checkpoint
            size = wal.stat().st_size  # resets it; then it is written over, same size
            median_ms(50)
        return {"fsync_commit_ms": median_ms(commits), "fsync_commit_fresh_ms": fresh}
    finally:
        conn.close()


def luxid_pid(run: Path) -> int:
    """The pid of the lw-luxid serving run directory `run`."""
    return next(
        p.pid for p in psutil.process_iter(["cmdline"])
        if p.info["cmdline"] and "lw-luxid" in " ".join(p.info["cmdline"])
        and str(run) in p.info["cmdline"]
    )  # fmt: skip


@contextlib.contextmanager
def stack(
    root: Path, *luxid_args: str, wconfd_args: tuple[str, ...] = ()
) -> Iterator[tuple[Path, int]]:
    """wconfd + luxid on `root`, each with its own extra options; yields (run dir, luxid
    pid)."""
    with (
        daemon("wconfd", *wconfd_args, base=root) as (run, _),
        daemon("luxid", *luxid_args, base=root),
    ):
        yield run, luxid_pid(run)
