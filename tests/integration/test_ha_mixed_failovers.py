"""20 forced failovers under a mixed load (docs/contracts.md#replicated-control-plane, issue 15):
three control-plane nodes, each a wconfd and a luxid on one real three-member etcd (as
`lw up --ha 3` runs them).

Through the whole test:
- config writers add filters (each tagged with its own number) to whichever wconfd
  serves and record every acknowledged one;
- lock takers, one process per node on that node's wconfd, take and release locks and
  check after each grant that the master holds exactly what they were granted; after a
  failover the first answer a taker gets shows none of its old locks (they were granted
  by the dead master: a failover releases them);
- job submitters send jobs to whichever luxid serves: OP_NODE_ADD (locks and a config
  write) then OP_TEST_DELAY (a lock, and a log line that a second run would repeat).

Each failover kills -9 the master's wconfd, luxid and job processes (some right after
their takeover, some after serving a while), waits until another node serves (checking
that the new master holds no lock of the old master's processes), then brings the killed
node back as a standby.

At the end: every acknowledged filter and job is there, no filter twice; every job ended
`success` or with "master failover"; no opcode ran twice: its durable start never
changes, every started opcode has its gate, no OP_NODE_ADD found its node already there
and no OP_TEST_DELAY logged twice; each successful node add left its node in the config.
"""

from __future__ import annotations

import itertools
import signal
import subprocess
import sys
import textwrap
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import EtcdCluster
from ha_testlib import ControlNode, JobStarts, job_starts, store_url
from luxid_testlib import FINAL

from client import LuxiClient, errors

pytestmark = [pytest.mark.timeout(300), pytest.mark.slow]

FAILOVERS = 20
NODES = 3
# How long each master serves before it is killed: some die right after their takeover,
# some after the load has gone on for a while.
DWELL = (0.0, 0.3, 0.8)
FAILOVER_LIMIT = 5.0
TAG_BASE = 10**9  # filter watermarks above every job id: the filters apply to no job
DOWN = (errors.NotMaster, errors.ConnectionError, errors.StorageError, OSError)

# One lock taker: a process on one node, talking to that node's wconfd. It prints one
# line per problem, and its number of checked grants when it gets SIGTERM.
TAKER = textwrap.dedent(
    """
    import random, signal, sys, time
    from client import WConfdClient, errors
    socket, me = sys.argv[1], sys.argv[2]
    pool = [f"node/{me}-{i}" for i in range(6)]
    grants = 0
    def done(*_):
        print("grants", grants, flush=True)
        sys.exit(0)
    signal.signal(signal.SIGTERM, done)
    down = (errors.NotMaster, errors.ConnectionError, errors.StorageError, OSError)
    while True:
        try:
            with WConfdClient(socket, name=me, timeout=5) as wc:
                held = sorted(tuple(pair) for pair in wc.list_locks())
                if held:
                    print("after a reconnection still held:", held, flush=True)
                    wc.free_locks()
                while True:
                    want = sorted(random.sample(pool, random.randint(1, 3)))
                    failed = wc.try_update_locks([[lk, "exclusive"] for lk in want])
                    if failed:
                        print("uncontended locks refused:", failed, flush=True)
                    held = sorted(tuple(pair) for pair in wc.list_locks())
                    if held != [(lk, "exclusive") for lk in want]:
                        print("granted", want, "but the master holds", held, flush=True)
                    grants += 1
                    time.sleep(0.01)
                    wc.try_update_locks([[lk, "release"] for lk in want])
        except down:
            time.sleep(0.05)
    """
)


class Load:
    """Threads sending work to whichever node serves; `acked` holds what was answered."""

    def __init__(self, nodes: list[ControlNode]) -> None:
        self.nodes = nodes
        self.filters: dict[str, int] = {}  # acknowledged filter uuid → its tag
        self.jobs: dict[int, int] = {}  # acknowledged job id → its number
        self.failures: list[BaseException] = []
        self.numbers = itertools.count()  # a number is never used twice, acknowledged or not
        self.stop = threading.Event()
        self.threads = [
            threading.Thread(target=self._guarded, args=(work, i), daemon=True)
            for i, work in enumerate([self._write_config, self._write_config, self._submit])
        ]
        for t in self.threads:
            t.start()

    def _guarded(self, work: Any, index: int) -> None:
        while not self.stop.is_set():
            for node in self.nodes:
                try:
                    work(node, index)
                except DOWN:
                    continue  # not an acknowledgement: try the other node
                except BaseException as exc:  # anything else is a bug: fail the test
                    self.failures.append(exc)
                    return
            time.sleep(0.02)

    def _write_config(self, node: ControlNode, index: int) -> None:
        with node.wconfd.client(f"writer{index}", timeout=5.0) as wc:
            while not self.stop.is_set():
                tag = TAG_BASE + next(self.numbers)
                made = wc.add_object(kind="filter", object={"watermark": tag})
                self.filters[made["uuid"]] = tag
                time.sleep(0.05)

    def _submit(self, node: ControlNode, index: int) -> None:
        with LuxiClient(node.luxid.socket, timeout=10) as lc:
            while not self.stop.is_set():
                numbers = [next(self.numbers) for _ in range(3)]
                answers = lc.submit_many_jobs(jobs=[job(n) for n in numbers])
                for (ok, job_id), n in zip(answers, numbers, strict=True):
                    assert ok, job_id
                    self.jobs[job_id] = n
                time.sleep(0.1)

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)


def job(n: int) -> list[dict[str, Any]]:
    """Job number n: add node j<n>, then hold a lock shared with other jobs and log."""
    return [
        {"OP_ID": "OP_NODE_ADD", "node_name": f"j{n}"},
        {"OP_ID": "OP_TEST_DELAY", "duration": 0.05, "on_nodes": [f"s{n % 4}"],
         "log_messages": [f"delay of job {n}"]},
    ]  # fmt: skip


def check_once(seen: dict[tuple[int, int], float], now: JobStarts) -> None:
    """No opcode durably started gets a new start (it never ran a second time), and every
    durably started opcode passed its gate."""
    twice = {k: (seen[k], v) for k, v in now.exec_ts.items() if k in seen and seen[k] != v}
    assert not twice, f"opcodes started again: {twice}"
    ungated = set(now.exec_ts) - now.gates
    assert not ungated, f"opcodes started without their gate: {sorted(ungated)}"
    seen.update(now.exec_ts)


def start_taker(node: ControlNode) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", TAKER, str(node.wconfd.socket), f"taker-{node.node}"],
        stdout=subprocess.PIPE,
        text=True,
    )


def stop_taker(taker: subprocess.Popen[str]) -> tuple[int, list[str]]:
    """SIGTERM it; its number of checked grants and the problems it printed."""
    taker.send_signal(signal.SIGTERM)
    out, _ = taker.communicate(timeout=30)
    lines = out.splitlines()
    assert lines and lines[-1].startswith("grants "), out
    return int(lines[-1].split()[1]), lines[:-1]


def wait_any_serving(nodes: list[ControlNode], timeout: float) -> ControlNode:
    """The first of `nodes` to serve as master (wconfd and luxid both)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for node in nodes:
            if node.serving():
                return node
        time.sleep(0.02)
    raise TimeoutError(f"none of {[n.node for n in nodes]} serves within {timeout} s")


def owners_of(node: ControlNode) -> set[str]:
    """The owners of every lock the node's wconfd grants now."""
    with node.wconfd.client("check") as wc:
        return {owner.client_id for lock in wc.list_all_locks().locks for owner in lock.owners}


def test_twenty_failovers_under_mixed_load_lose_nothing_and_run_nothing_twice(
    tmp_path: Path, etcd_cluster: EtcdCluster
) -> None:
    cluster = etcd_cluster
    prefix = f"/t/{uuid.uuid4().hex}"
    url = store_url(cluster.endpoints, prefix)
    nodes = [ControlNode(tmp_path, f"node{i}", url) for i in range(1, NODES + 1)]
    takers: dict[str, subprocess.Popen[str]] = {}
    seen: dict[tuple[int, int], float] = {}
    took: list[float] = []
    load = None
    try:
        nodes[0].start().wait_serving(20)
        for node in nodes[1:]:
            node.start()
        takers = {n.node: start_taker(n) for n in nodes}
        load = Load(nodes)
        master = nodes[0]
        for i in range(FAILOVERS):
            time.sleep(DWELL[i % len(DWELL)])  # locks, writes and jobs go on under it
            dead_jobs = master.die()
            killed = time.monotonic()
            check_once(seen, job_starts(cluster.endpoints, prefix))
            others = [n for n in nodes if n is not master]
            new = wait_any_serving(others, FAILOVER_LIMIT + 10)
            took.append(time.monotonic() - killed)
            # The old master's processes (its lock taker lives on, its job processes are
            # dead) hold nothing on the new master.
            stale = {
                owner
                for owner in owners_of(new)
                if owner.startswith(f"taker-{master.node}:") or _pid(owner) in dead_jobs
            }
            assert not stale, f"the new master holds locks of the old master's processes: {stale}"
            master.start()  # back as a standby
            master = new
        load.close()
        assert not load.failures, load.failures
        final = master
        grants = {}
        for name, taker in takers.items():
            grants[name], problems = stop_taker(taker)
            assert not problems, f"lock taker of {name}: {problems}"
        assert all(count > 20 for count in grants.values()), grants
        assert len(load.filters) > 100 and len(load.jobs) > 100, (load.filters, load.jobs)
        check_filters(final, load.filters)
        check_once(seen, job_starts(cluster.endpoints, prefix))
        check_jobs(final, load.jobs, {job_id for job_id, _ in seen})
        assert max(took) <= FAILOVER_LIMIT, f"failover times {took}"
    finally:
        if load is not None:
            load.close()
        for taker in takers.values():
            if taker.poll() is None:
                taker.kill()
                taker.communicate()
        for node in nodes:
            node.stop()


def check_filters(node: ControlNode, acked: dict[str, int]) -> None:
    """Every acknowledged filter is there, and no filter was applied twice."""
    with node.wconfd.client("check") as wc:
        stored = wc.list_objects(kind="filter")
    uuids = {f["uuid"] for f in stored}
    missing = [u for u in acked if u not in uuids]
    assert not missing, f"{len(missing)} of {len(acked)} acknowledged filters lost"
    tags = [f["watermark"] for f in stored]
    assert len(tags) == len(set(tags)), "a filter was applied twice"


def check_jobs(node: ControlNode, acked: dict[int, int], started: set[int]) -> None:
    """Every acknowledged job is there and ends success, or "master failover" if one of
    its opcodes had `started` (else it was queued again); no opcode of any ran twice (its
    own side effects); each node added is in the config."""
    ids = sorted(acked)
    fields = ["id", "status", "opresult", "oplog"]
    with LuxiClient(node.luxid.socket, timeout=60) as lc:
        deadline = time.monotonic() + 60
        while True:
            rows = lc.query_jobs(ids=ids, fields=fields)
            lost = [i for i, row in zip(ids, rows, strict=True) if row is None]
            assert not lost, f"acknowledged jobs lost: {lost}"
            if all(row[1] in FINAL for row in rows):
                break
            assert time.monotonic() < deadline, "jobs did not finish after the failovers"
            time.sleep(0.2)
    with node.wconfd.client("check") as wc:
        added = {n["name"]: n["uuid"] for n in wc.list_objects(kind="node")}
    for job_id, status, results, logs in rows:
        n = acked[job_id]
        failed_over = "master failover" in str(results) and job_id in started
        assert status == "success" or failed_over, (job_id, status, results)
        assert "already exists" not in str(results), f"job {job_id} added its node twice"
        delays = [entry for op_log in logs for entry in op_log if f"delay of job {n}" in str(entry)]
        assert len(delays) <= 1, f"job {job_id}'s OP_TEST_DELAY ran twice: {delays}"
        if status == "success":
            assert added.get(f"j{n}") == results[0]["uuid"], (job_id, results, added.get(f"j{n}"))
            assert len(delays) == 1


def _pid(owner: str) -> int:
    try:
        return int(owner.rsplit(":", 2)[1])
    except (IndexError, ValueError):
        return -1
