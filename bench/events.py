"""The event stream's figures (docs/contracts.md#events), with real wconfd, luxid and
lw-rapi daemons:

- latency: an SSE subscriber on `GET /2/events?topics=queue`; the bench toggles the drain
  flag and times from the call's start (the change is durable before the call returns, so
  this bounds the time from durable to delivered from above) to the frame read.  Target:
  p99 ≤ 50 ms.
- submits: `submit_job`/s, 64 in flight (a PAUSE rule keeps the jobs queued), with no
  subscriber and with 100 subscribers following every topic of both daemons (a child
  process running 100 follow_events followers per daemon: the daemon pushes each batch),
  alternated, medians.  Target: with
  100 ≥ 0.85 x without.  The target is about the daemons' cost, but on one 2-core machine
  the subscribers' own work (a third of a core) and the submitting client compete with
  luxid for the cores.  So luxid runs on a core of its own (CPU 0; this process, its
  subscribers and the other daemons on the others), in both runs alike: the `ratio` row.
  Unpinned, as they fall, the figure is `ratio_unpinned`.  The subscribers of the row
  read every answer whole (the daemons do exactly the same work) but decode only `last`;
  `full` ones decode everything through the asyncio stub (`ratio_full_decoding`, pinned);
  `ratio_watch_events` is the same with 100 watch_events loops instead (a round trip per
  batch: what follow_events saves).
  `luxid_cpu_us_per_submit` is luxid's own CPU time per submit with and without them
  (`cpu_ratio`): the daemon's cost alone, the steadiest of these figures on a noisy machine.
- lock cycles: one client's durable acquire+release cycles/s with no subscriber and with
  one subscriber to the other topics (wconfd then writes no lock events: a lock cycle
  must cost the same), alternated, medians.  Target: ratio ≥ 0.97.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import msgspec
import psutil

# Python puts this script's directory first; it holds bench/queue.py, which would shadow
# the standard library's `queue`: move the directory to the end.
sys.path.append(sys.path.pop(0))

import queue as stdqueue

from _luxid import PAUSE_ALL, REJECT_ALL, pipelined_submit_rate
from _util import cpu_count, daemon, rapi, summary
from locks import cycles_per_s

from client import AsyncLuxiClient, AsyncWConfdClient, LuxiClient, WConfdClient
from client.api.common import TOPICS

OTHER_TOPICS = [t for t in TOPICS if t != "lock"]


# -- (a) latency ------------------------------------------------------------------------------


def sse_frames(port: int, out: stdqueue.Queue[float], ready: threading.Event) -> None:
    """Read `GET /2/events?topics=queue`; put the time each frame is complete."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    conn.request("GET", "/2/events?topics=queue")
    resp = conn.getresponse()
    ready.set()
    data = False
    while True:
        line = resp.readline()
        if not line:
            return
        if line.startswith(b"data:"):
            data = True
        elif line == b"\n" and data:
            out.put(time.perf_counter())
            data = False


def latency(run: Path, port: int, samples: int) -> dict[str, Any]:
    frames: stdqueue.Queue[float] = stdqueue.Queue()
    ready = threading.Event()
    threading.Thread(target=sse_frames, args=(port, frames, ready), daemon=True).start()
    ready.wait(10)
    time.sleep(0.2)
    lc = LuxiClient(run / "luxid.sock")
    got = []
    for i in range(samples):
        start = time.perf_counter()
        lc.set_drain_flag(flag=i % 2 == 0)
        got.append(frames.get(timeout=10) - start)
    lc.set_drain_flag(flag=False)
    lc.close()
    return summary(got)


# -- (b) submits with subscribers --------------------------------------------------------------


class _Last(msgspec.Struct):
    last: int


class _Frame(msgspec.Struct):
    """An answer (`result`) or a pushed notification (`params`), only `last` decoded."""

    result: _Last | None = None
    params: _Last | None = None


_frame = msgspec.json.Decoder(_Frame)
MODES = ("follow", "watch", "full")


async def _newest(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> int:
    """The daemon's newest event index (watch_events with no topic answers it at once)."""
    params = {"after": 0, "topics": [], "timeout": 0}
    writer.write(msgspec.json.encode(_call("watch_events", params, 0)) + b"\n")
    frame = _frame.decode(await reader.readline())
    assert frame.result is not None
    return frame.result.last


def _call(method: str, params: dict[str, Any], ident: int) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params, "id": ident}


async def follow_pushed(socket: Path) -> None:
    """Follow every topic with follow_events over a plain socket: the daemon pushes each
    batch; every frame read whole, only `last` decoded."""
    reader, writer = await asyncio.open_unix_connection(str(socket), limit=1 << 26)
    params = {"after": await _newest(reader, writer), "topics": list(TOPICS)}
    writer.write(msgspec.json.encode(_call("follow_events", params, 1)) + b"\n")
    while True:
        _frame.decode(await reader.readline())


async def follow_watching(socket: Path) -> None:
    """Follow every topic with a watch_events loop over a plain socket (a round trip per
    batch): every answer read whole, only `last` decoded."""
    reader, writer = await asyncio.open_unix_connection(str(socket), limit=1 << 26)
    after, ident = await _newest(reader, writer), 0
    while True:
        ident += 1
        params = {"after": after, "topics": list(TOPICS), "timeout": 30}
        writer.write(msgspec.json.encode(_call("watch_events", params, ident)) + b"\n")
        frame = _frame.decode(await reader.readline())
        assert frame.result is not None
        after = frame.result.last


async def follow_full(client: Any) -> None:
    """Follow every topic through the asyncio stub's follow_events (each event decoded)."""
    after = (await client.watch_events(after=0, topics=[], timeout=0)).last
    async for _ in client.follow_events(after=after, topics=list(TOPICS)):
        pass


async def subscribers(run: Path, count: int, mode: str) -> None:
    """`count` followers of every topic on each daemon, until stdin closes."""
    sockets = [run / f"{d}.sock" for d in ("luxid", "wconfd") for _ in range(count)]
    if mode == "follow":
        work = [follow_pushed(socket) for socket in sockets]
    elif mode == "watch":
        work = [follow_watching(socket) for socket in sockets]
    else:
        luxi = [AsyncLuxiClient(run / "luxid.sock") for _ in range(count)]
        wconfd = [AsyncWConfdClient(run / "wconfd.sock", name=f"sub{i}") for i in range(count)]
        work = [follow_full(c) for c in luxi + wconfd]
    tasks = [asyncio.create_task(w) for w in work]
    await asyncio.sleep(1.0)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    for task in tasks:
        task.cancel()


class Rate(NamedTuple):
    """Calls/s, and the daemon's CPU time per call meanwhile (µs)."""

    per_s: float
    cpu_us: float


def submit_rate(run: Path, seconds: float) -> Rate:
    luxid = luxid_process(run)
    before = sum(luxid.cpu_times()[:2])
    started = time.perf_counter()
    per_s = pipelined_submit_rate(run / "luxid.sock", seconds)
    cpu = sum(luxid.cpu_times()[:2]) - before
    return Rate(per_s, cpu / (per_s * (time.perf_counter() - started)) * 1e6)


def with_subscribers(run: Path, count: int, seconds: float, mode: str) -> Rate:
    """Submits/s while a child process runs `count` subscribers on each daemon."""
    child = subprocess.Popen(
        [sys.executable, __file__, "--subscribe", str(run), "--count", str(count),
         "--mode", mode],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    rate = submit_rate(run, seconds)
    assert child.stdin is not None
    child.stdin.close()
    child.wait(10)
    return rate


def luxid_process(run: Path) -> psutil.Process:
    """The luxid serving `run`."""
    return daemon_process(run, "lw-luxid")


def daemon_process(run: Path, program: str) -> psutil.Process:
    """The daemon `program` serving `run`."""
    for proc in psutil.process_iter(["cmdline"]):
        cmdline = proc.info["cmdline"] or []
        if any(program in part for part in cmdline) and str(run) in " ".join(cmdline):
            return proc
    raise RuntimeError(f"no {program} for {run}")


@contextlib.contextmanager
def luxid_on_its_own_core(run: Path) -> Iterator[None]:
    """luxid (every thread) on CPU 0, this process and what it starts on the others."""
    cpus = os.sched_getaffinity(0)
    rest = cpus - {0}
    threads = [thread.id for thread in luxid_process(run).threads()]
    for tid in threads:
        os.sched_setaffinity(tid, {0})
    os.sched_setaffinity(0, rest)
    try:
        yield
    finally:
        os.sched_setaffinity(0, cpus)
        for tid in threads:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(tid, cpus)


def submits(run: Path, count: int, rounds: int, seconds: float) -> dict[str, Any]:
    lc = LuxiClient(run / "luxid.sock")
    uuid = lc.replace_filter(uuid=None, **PAUSE_ALL)
    submit_rate(run, 1.0)  # warm the WAL up
    pin = len(os.sched_getaffinity(0)) >= 2 and 0 in os.sched_getaffinity(0)
    without: list[Rate] = []
    light: list[Rate] = []
    full: list[Rate] = []
    watching: list[Rate] = []
    without_unpinned: list[Rate] = []
    light_unpinned: list[Rate] = []
    for _ in range(rounds):
        without_unpinned.append(submit_rate(run, seconds))
        light_unpinned.append(with_subscribers(run, count, seconds, "follow"))
        with luxid_on_its_own_core(run) if pin else contextlib.nullcontext():
            without.append(submit_rate(run, seconds))
            light.append(with_subscribers(run, count, seconds, "follow"))
            full.append(with_subscribers(run, count, seconds, "full"))
            watching.append(with_subscribers(run, count, seconds, "watch"))
    lc.replace_filter(uuid=uuid, **REJECT_ALL)
    lc.delete_filter(uuid=uuid)
    lc.close()

    def rate(runs: list[Rate]) -> float:
        return statistics.median(r.per_s for r in runs)

    def cpu(runs: list[Rate]) -> float:
        return statistics.median(r.cpu_us for r in runs)

    return {
        "subscribers": count,
        "luxid_pinned": pin,
        "without_per_s": round(rate(without)),
        "with_per_s": round(rate(light)),
        "ratio": round(rate(light) / rate(without), 3),
        "with_full_decoding_per_s": round(rate(full)),
        "ratio_full_decoding": round(rate(full) / rate(without), 3),
        "with_watch_events_per_s": round(rate(watching)),
        "ratio_watch_events": round(rate(watching) / rate(without), 3),
        "without_unpinned_per_s": round(rate(without_unpinned)),
        "with_unpinned_per_s": round(rate(light_unpinned)),
        "ratio_unpinned": round(rate(light_unpinned) / rate(without_unpinned), 3),
        # luxid's own CPU time per submit: its cost, whatever the machine's other work.
        "luxid_cpu_us_per_submit": {
            "without": round(cpu(without + without_unpinned), 1),
            "with": round(cpu(light + light_unpinned), 1),
        },
        "cpu_ratio": round(cpu(without + without_unpinned) / cpu(light + light_unpinned), 3),
        "luxid_cpu_us_per_submit_watch_events": round(cpu(watching), 1),
        "target_ratio": 0.85,
    }


# -- (c) lock cycles -----------------------------------------------------------------------------


def lock_cycles(run: Path, rounds: int, seconds: float) -> dict[str, Any]:
    client = WConfdClient(run / "wconfd.sock", name="bench-locks")
    wconfd = daemon_process(run, "lw-wconfd")
    stop = threading.Event()

    def subscriber() -> None:
        with WConfdClient(run / "wconfd.sock", name="bench-sub") as sub:
            after = sub.watch_events(after=0, topics=[], timeout=0).last
            while not stop.is_set():
                after = sub.watch_events(after=after, topics=OTHER_TOPICS, timeout=0.5).last

    def measured() -> Rate:
        before = sum(wconfd.cpu_times()[:2])
        per_s = cycles_per_s(client, seconds)
        cpu = sum(wconfd.cpu_times()[:2]) - before
        return Rate(per_s, cpu / (per_s * seconds) * 1e6)

    cycles_per_s(client, 1.0)
    first = client.watch_events(after=0, topics=[], timeout=0).last
    without: list[Rate] = []
    with_one: list[Rate] = []
    for _ in range(rounds):
        without.append(measured())
        stop.clear()
        thread = threading.Thread(target=subscriber)
        thread.start()
        time.sleep(0.1)
        with_one.append(measured())
        stop.set()
        thread.join()
    written = client.watch_events(after=0, topics=[], timeout=0).last - first
    client.close()
    a, b = (statistics.median(r.per_s for r in runs) for runs in (without, with_one))
    cpu_a, cpu_b = (statistics.median(r.cpu_us for r in runs) for runs in (without, with_one))
    return {
        "without_per_s": round(a),
        "with_one_subscriber_per_s": round(b),
        "ratio": round(b / a, 3),
        # wconfd's own CPU time per cycle: its cost, whatever the machine's other work.
        "wconfd_cpu_us_per_cycle": {"without": round(cpu_a, 1), "with": round(cpu_b, 1)},
        "cpu_ratio": round(cpu_a / cpu_b, 3),
        "events_written": written,
        "target_ratio": 0.97,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subscribe", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--mode", choices=MODES, default="follow", help=argparse.SUPPRESS)
    parser.add_argument("--count", type=int, default=100, help="subscribers (default 100)")
    parser.add_argument("--samples", type=int, default=300, help="latency samples")
    parser.add_argument("--rounds", type=int, default=3, help="alternated rounds")
    parser.add_argument("--seconds", type=float, default=3.0, help="seconds per measurement")
    args = parser.parse_args()
    if args.subscribe is not None:
        asyncio.run(subscribers(args.subscribe, args.count, args.mode))
        return
    with daemon("wconfd") as (run, state), daemon("luxid", base=run.parent):
        with rapi(run, state, "--allow-anonymous-read") as conn:
            port = conn.port
            out: dict[str, Any] = {"bench": "events", "cpus": cpu_count()}
            out["latency"] = {**latency(run, port, args.samples), "target_p99_ms": 50}
        # Lock cycles first: the submits' subscribers follow `lock` too, and wconfd goes on
        # writing lock events for 30 s after the last of them.
        out["lock_cycles"] = lock_cycles(run, args.rounds, args.seconds)
        out["submits"] = submits(run, args.count, args.rounds, args.seconds)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
