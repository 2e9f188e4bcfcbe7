"""Lock state survives kill -9 of wconfd, as it is durable before the answer
(docs/contracts.md#lock-rules, rule 7); stubs re-issue waits
(docs/contracts.md#python-client-stubs)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from client import WConfdClient

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.parametrize("wconfd", ["local", "etcd"], indirect=True),  # local files and etcd
]

HOLDER = textwrap.dedent(
    """
    import sys, time, json
    from client import WConfdClient
    wc = WConfdClient(sys.argv[1], job_id=int(sys.argv[2]))
    assert wc.try_update_locks(json.loads(sys.argv[3])) == []
    print(wc.client_id, flush=True)
    sys.stdin.readline()          # released when the test closes stdin
    wc.free_locks()
    print("freed", flush=True)
    time.sleep(600)
    """
)


def spawn(socket, job_id, request):
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(socket), str(job_id), json.dumps(request)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    client_id = proc.stdout.readline().strip()
    assert client_id
    return proc, client_id


def locks_view(client):
    return [
        (lk.name, sorted((o.client_id, o.mode) for o in lk.owners))
        for lk in client.list_all_locks().locks
    ]


def test_kill9_restart_restores_live_holders_and_releases_dead(wconfd):
    procs = []
    try:
        p1, c1 = spawn(wconfd.socket, 1, [["cluster/BGL", "shared"], ["node/n1", "exclusive"]])
        p2, c2 = spawn(wconfd.socket, 2, [["cluster/BGL", "shared"], ["node/n2", "shared"]])
        p3, c3 = spawn(wconfd.socket, 3, [["node/n2", "shared"], ["node-res/n2", "exclusive"]])
        procs = [p1, p2, p3]
        me = WConfdClient(wconfd.socket, name="observer")
        assert me.try_update_locks([["instance/i1", "exclusive"]]) == []
        before = locks_view(me)
        wconfd.kill()
        p3.kill()  # dies while wconfd is down
        p3.wait()
        wconfd.start()
        after = locks_view(me)  # the stub reconnects and re-identifies
        expected = [(name, [o for o in owners if o[0] != c3]) for name, owners in before]
        assert after == [(n, o) for n, o in expected if o]
        assert me.list_locks() == [["instance/i1", "exclusive"]]
        ids = {c.client_id for c in me.list_clients()}
        assert {c1, c2} <= ids and c3 not in ids
        # A restored holder still releases normally, and its waiters are served.
        p1.stdin.close()
        assert p1.stdout.readline().strip() == "freed"
        assert me.try_update_locks([["node/n1", "exclusive"]]) == []
    finally:
        for p in procs:
            p.kill()
            p.wait()


def test_waiting_stub_reissues_after_wconfd_restart(wconfd):
    holder, _ = spawn(wconfd.socket, 7, [["node/n1", "exclusive"]])
    try:
        waiter = WConfdClient(wconfd.socket, name="waiter")
        waiter.ping()
        result = {}

        def wait():
            result["r"] = waiter.update_locks_waiting([["node/n1", "exclusive"]], timeout=60)

        thread = threading.Thread(target=wait)
        thread.start()
        time.sleep(0.3)
        wconfd.kill()
        wconfd.start()
        time.sleep(0.5)  # the stub reconnects and re-issues its request
        observer = WConfdClient(wconfd.socket, name="observer")
        deadline = time.monotonic() + 10
        while not observer.list_all_locks().pending:
            assert time.monotonic() < deadline, "the wait was not re-issued"
            time.sleep(0.05)
        holder.stdin.close()
        assert holder.stdout.readline().strip() == "freed"
        thread.join(10)
        assert result["r"].granted
        assert waiter.list_locks() == [["node/n1", "exclusive"]]
    finally:
        holder.kill()
        holder.wait()
