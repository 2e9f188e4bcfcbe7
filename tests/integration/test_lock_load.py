"""Load: 16 client processes do random lock operations against one wconfd (issue 3).

Each worker checks, after every grant, that the daemon's whole lock table has no two owners holding
conflicting locks (docs/contracts.md#lock-conflicts); every waiting call must come back granted or
timed out within its timeout plus slack (no lost wake-ups); wconfd's RSS stays flat.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

SECONDS = float(os.environ.get("LW_LOAD_SECONDS", "30"))
WORKERS = 16

WORKER = textwrap.dedent(
    """
    import json, random, sys, time
    from client import WConfdClient, errors

    socket, seed, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
    rng = random.Random(seed)
    POOL = ["cluster/BGL", "instance/[lockset]", "instance/i1", "instance/i2",
            "node/[lockset]", "node/n1", "node/n2", "node/n3", "node-res/n1"]
    LEVEL = {"cluster": 0, "instance": 1, "nodegroup": 2, "node": 3, "node-res": 4, "network": 5}

    def key(lock):
        level, name = lock.split("/", 1)
        return (LEVEL[level], 0 if name == "[lockset]" else 1, name)

    def conflicting(a_lock, a_mode, b_lock, b_mode):
        if "exclusive" not in (a_mode, b_mode):
            return False
        if a_lock == b_lock:
            return True
        la, lb = a_lock.split("/", 1), b_lock.split("/", 1)
        return la[0] == lb[0] and "[lockset]" in (la[1], lb[1])

    def check(client):
        held = [(lk.name, o.client_id, o.mode) for lk in client.list_all_locks().locks for o in lk.owners]
        for i, (la, oa, ma) in enumerate(held):
            for lb, ob, mb in held[i + 1:]:
                if oa != ob and conflicting(la, ma, lb, mb):
                    raise AssertionError(f"conflict: {oa} {la} {ma} vs {ob} {lb} {mb}")

    client = WConfdClient(socket, name=f"load{seed}")
    stats = {"grants": 0, "timeouts": 0, "deadlocks": 0, "blocked": 0, "order": 0, "max_overshoot": 0.0}
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        client.free_locks()
        locks = sorted(rng.sample(POOL, rng.randint(1, 3)), key=key)
        request = [[lk, rng.choice(["shared", "exclusive"])] for lk in locks]
        op = rng.random()
        try:
            if op < 0.3:
                if client.try_update_locks(request):
                    stats["blocked"] += 1
                    continue
            elif op < 0.4:
                client.opportunistic_lock_union(request, timeout=rng.choice([0, 0.05]))
            else:
                timeout = rng.choice([0.05, 0.2, 1.0])
                t0 = time.monotonic()
                try:
                    result = client.update_locks_waiting(request, priority=rng.randint(-2, 2), timeout=timeout)
                except errors.DeadlockError:
                    stats["deadlocks"] += 1
                    continue
                overshoot = time.monotonic() - t0 - timeout
                stats["max_overshoot"] = max(stats["max_overshoot"], overshoot)
                if not result.granted:
                    stats["timeouts"] += 1
                    continue
        except errors.LockOrderError:  # e.g. a member exclusive beside its lockset shared
            stats["order"] += 1
            continue
        stats["grants"] += 1
        check(client)
        if rng.random() < 0.3:  # an upgrade of what is held
            held = client.list_locks()
            if held:
                try:
                    client.update_locks_waiting([[held[-1][0], "exclusive"]], timeout=0.1)
                except (errors.DeadlockError, errors.LockOrderError):
                    stats["deadlocks"] += 1
                check(client)
        time.sleep(rng.random() * 0.005)
    client.free_locks()
    print(json.dumps(stats), flush=True)
    """
)


def test_sixteen_random_clients(wconfd):
    daemon = psutil.Process(wconfd.pid)
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, str(wconfd.socket), str(seed), str(SECONDS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for seed in range(WORKERS)
    ]
    time.sleep(min(5.0, SECONDS / 3))
    rss_early = daemon.memory_info().rss
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=SECONDS + 90)
        assert proc.returncode == 0, err
        results.append(json.loads(out))
    rss_late = daemon.memory_info().rss
    grants = sum(r["grants"] for r in results)
    assert grants > WORKERS * 10
    # Every wait came back within its timeout plus slack: no lost wake-ups.
    assert max(r["max_overshoot"] for r in results) < 2.0
    assert rss_late - rss_early < 30 * 1024 * 1024, (rss_early, rss_late)
    assert "Traceback" not in wconfd.log()
    # Everything was released: the table is empty.
    from client import WConfdClient

    final = WConfdClient(wconfd.socket, name="final").list_all_locks()
    assert final.locks == [] and final.pending == []
