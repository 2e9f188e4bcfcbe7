"""wconfd's locks (docs/contracts.md#locks) through the real socket, with several real client
processes."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil
import pytest

from client import AsyncWConfdClient, WConfdClient, errors

pytestmark = [
    pytest.mark.timeout(90),
    pytest.mark.parametrize("wconfd", ["local", "etcd"], indirect=True),  # local files and etcd
]

HOLDER = textwrap.dedent(
    """
    import sys, time, json
    from client import WConfdClient
    wc = WConfdClient(sys.argv[1], name=sys.argv[2])
    request = json.loads(sys.argv[3])
    assert wc.try_update_locks(request) == [], "holder could not lock"
    print(wc.client_id, flush=True)
    time.sleep(600)
    """
)


def spawn_holder(socket, name, request):
    """A separate process that takes `request` and sleeps; returns (proc, client_id)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(socket), name, json.dumps(request)],
        stdout=subprocess.PIPE,
        text=True,
    )
    client_id = proc.stdout.readline().strip()
    assert client_id, "holder failed"
    return proc, client_id


def identified_raw(raw_factory, socket):
    """A raw connection that has identified as this process, named "raw" (request id 1)."""
    conn = raw_factory(socket)
    start = psutil.Process().create_time()
    identify = {
        "jsonrpc": "2.0",
        "method": "identify",
        "params": {"job_id": None, "pid": os.getpid(), "start_time": start, "name": "raw"},
        "id": 1,
    }
    conn.call(json.dumps(identify).encode() + b"\n")
    return conn


def client(wconfd, name):
    return WConfdClient(wconfd.socket, name=name)


def test_calls_before_identify_are_refused(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    answer = conn.call(b'{"jsonrpc":"2.0","method":"list_locks","id":1}\n')
    assert answer["error"]["code"] == -32000
    assert answer["error"]["data"]["type"] == "NotIdentified"
    assert conn.call(b'{"jsonrpc":"2.0","method":"ping","id":2}\n')["result"] == "pong"


def test_try_update_conflicts_and_atomicity(wconfd):
    a, b = client(wconfd, "a"), client(wconfd, "b")
    assert a.try_update_locks([["node/n1", "exclusive"]]) == []
    assert b.try_update_locks([["node/n0", "exclusive"], ["node/n1", "shared"]]) == [a.client_id]
    assert b.list_locks() == []  # nothing applied
    assert a.try_update_locks([["node/n1", "shared"]]) == []  # downgrade
    assert b.try_update_locks([["node/n2", "shared"], ["node/n1", "shared"]]) == []
    assert b.list_locks() == [["node/n1", "shared"], ["node/n2", "shared"]]
    # Lockset vs member: exclusive lockset conflicts with any member held by another.
    c = client(wconfd, "c")
    assert c.try_update_locks([["node/[lockset]", "exclusive"]]) == sorted(
        [a.client_id, b.client_id]
    )
    assert c.try_update_locks([["node/[lockset]", "shared"]]) == []  # shared with shared
    a.free_locks()
    b.free_locks()
    assert a.list_locks() == b.list_locks() == []


def test_order_violation_and_bad_names(wconfd):
    a = client(wconfd, "a")
    assert a.try_update_locks([["node/n2", "exclusive"]]) == []
    with pytest.raises(errors.LockOrderError) as info:
        a.try_update_locks([["instance/i1", "exclusive"]])
    assert "instance/i1" in info.value.message
    with pytest.raises(errors.InvalidParams):
        a.try_update_locks([["nolevel/x", "shared"]])
    with pytest.raises(errors.InvalidParams):
        a.try_update_locks([["node/a", "shared"], ["node/a", "exclusive"]])
    with pytest.raises(errors.InvalidParams, match="request"):
        a.try_update_locks([["node/a", "sideways"]])
    # A lockset already held covers its members.
    a.free_locks()
    assert a.try_update_locks([["node/[lockset]", "exclusive"], ["node-res/r", "shared"]]) == []
    assert a.try_update_locks([["node/x", "exclusive"]]) == []


def test_waiting_granted_on_release_and_timeout(wconfd):
    async def go():
        a = AsyncWConfdClient(wconfd.socket, name="a")
        b = AsyncWConfdClient(wconfd.socket, name="b")
        assert await a.try_update_locks([["node/n1", "exclusive"]]) == []
        timed_out = await b.update_locks_waiting([["node/n1", "shared"]], timeout=0.2)
        assert timed_out.granted is False and timed_out.blockers == [a.client_id]
        assert (await b.list_all_locks()).pending == []
        waiter = asyncio.ensure_future(b.update_locks_waiting([["node/n1", "shared"]]))
        await asyncio.sleep(0.1)
        pending = (await a.list_all_locks()).pending
        assert [p.client_id for p in pending] == [b.client_id]
        start = time.monotonic()
        await a.free_locks()
        result = await waiter
        assert result.granted and result.blockers == []
        assert time.monotonic() - start < 0.5
        assert await b.list_locks() == [["node/n1", "shared"]]
        # timeout 0 behaves as try_update_locks
        zero = await a.update_locks_waiting([["node/n1", "exclusive"]], timeout=0)
        assert zero.granted is False and zero.blockers == [b.client_id]
        await a.close()
        await b.close()

    asyncio.run(go())


def test_pending_request_blocks_other_requests(wconfd):
    async def go():
        a = AsyncWConfdClient(wconfd.socket, name="a")
        b = AsyncWConfdClient(wconfd.socket, name="b")
        await a.try_update_locks([["node/n1", "exclusive"]])
        waiter = asyncio.ensure_future(b.update_locks_waiting([["node/n1", "exclusive"]]))
        await asyncio.sleep(0.1)
        with pytest.raises(errors.PendingRequestError):
            await b.try_update_locks([["node/n2", "exclusive"]])
        await b.free_locks()  # withdraws the pending request
        result = await waiter
        assert result.granted is False and result.blockers == [a.client_id]
        await a.close()
        await b.close()

    asyncio.run(go())


def test_fairness_rule_5(wconfd):
    """A holds n1 shared; W waits exclusive; a later shared request from R is blocked by W."""

    async def go():
        a, w, r = (AsyncWConfdClient(wconfd.socket, name=n) for n in ("a", "w", "r"))
        await a.try_update_locks([["node/n1", "shared"]])
        w_wait = asyncio.ensure_future(w.update_locks_waiting([["node/n1", "exclusive"]]))
        await asyncio.sleep(0.1)
        await r.ping()
        assert await r.try_update_locks([["node/n1", "shared"]]) == [w.client_id]
        await a.free_locks()
        assert (await w_wait).granted
        await w.free_locks()
        assert await r.try_update_locks([["node/n1", "shared"]]) == []
        for c in (a, w, r):
            await c.close()

    asyncio.run(go())


def test_priorities_grant_order(wconfd):
    async def go():
        holder = AsyncWConfdClient(wconfd.socket, name="holder")
        low = AsyncWConfdClient(wconfd.socket, name="low")
        high = AsyncWConfdClient(wconfd.socket, name="high")
        await holder.try_update_locks([["node/n1", "exclusive"]])
        order: list[str] = []

        async def wait(c, prio):
            await c.update_locks_waiting([["node/n1", "exclusive"]], priority=prio)
            order.append(c.name)
            await asyncio.sleep(0.05)
            await c.free_locks()

        t_low = asyncio.ensure_future(wait(low, 10))
        await asyncio.sleep(0.1)
        t_high = asyncio.ensure_future(wait(high, -10))
        await asyncio.sleep(0.1)
        pending = (await holder.list_all_locks()).pending
        assert [p.priority for p in pending] == [-10, 10]
        await holder.free_locks()
        await asyncio.gather(t_low, t_high)
        assert order == ["high", "low"]
        for c in (holder, low, high):
            await c.close()

    asyncio.run(go())


def test_deadlock_rule_6(wconfd):
    async def go():
        a = AsyncWConfdClient(wconfd.socket, name="a")
        b = AsyncWConfdClient(wconfd.socket, name="b")
        await a.try_update_locks([["node/n1", "shared"]])
        await b.try_update_locks([["node/n1", "shared"]])
        a_wait = asyncio.ensure_future(a.update_locks_waiting([["node/n1", "exclusive"]]))
        await asyncio.sleep(0.1)
        with pytest.raises(errors.DeadlockError) as info:
            await b.update_locks_waiting([["node/n1", "exclusive"]])
        assert info.value.code == -32012
        assert await b.list_locks() == [["node/n1", "shared"]]
        await b.free_locks()
        assert (await a_wait).granted
        await a.close()
        await b.close()

    asyncio.run(go())


def test_opportunistic_union(wconfd):
    async def go():
        a = AsyncWConfdClient(wconfd.socket, name="a")
        b = AsyncWConfdClient(wconfd.socket, name="b")
        await a.try_update_locks([["node/n2", "exclusive"]])
        req = [["node/n1", "exclusive"], ["node/n2", "exclusive"], ["node/n3", "exclusive"]]
        got = await b.opportunistic_lock_union(req)
        assert got == ["node/n1", "node/n3"]
        await b.free_locks()
        assert await b.opportunistic_lock_union(req, min_count=3) == []
        assert await b.list_locks() == []
        waiting = asyncio.ensure_future(b.opportunistic_lock_union(req, timeout=5))
        await asyncio.sleep(0.1)
        await a.free_locks()
        assert await waiting == ["node/n1", "node/n2", "node/n3"]
        await b.free_locks()
        await a.try_update_locks([["node/n2", "exclusive"]])
        assert await b.opportunistic_lock_union(req, timeout=0.2) == ["node/n1", "node/n3"]
        await a.close()
        await b.close()

    asyncio.run(go())


def test_intersect_free_level_and_downgrade(wconfd):
    a = client(wconfd, "a")
    assert (
        a.try_update_locks(
            [["instance/i1", "exclusive"], ["node/n1", "exclusive"], ["node/n2", "exclusive"]]
        )
        == []
    )
    a.downgrade_locks_level("node")
    assert a.list_locks() == [
        ["instance/i1", "exclusive"],
        ["node/n1", "shared"],
        ["node/n2", "shared"],
    ]
    a.intersect_locks(["instance/i1", "node/n2"])
    assert a.list_locks() == [["instance/i1", "exclusive"], ["node/n2", "shared"]]
    a.free_locks_level("instance")
    assert a.list_locks() == [["node/n2", "shared"]]
    with pytest.raises(errors.InvalidParams):
        a.free_locks_level("nolevel")


def test_answers_out_of_order_on_one_connection(wconfd):
    async def go():
        a = AsyncWConfdClient(wconfd.socket, name="a")
        b = AsyncWConfdClient(wconfd.socket, name="b")
        await a.try_update_locks([["node/n1", "exclusive"]])
        waiter = asyncio.ensure_future(b.update_locks_waiting([["node/n1", "exclusive"]]))
        await asyncio.sleep(0.05)
        # Same connection as the waiting call: answered while it waits.
        assert await b.ping() == "pong"
        assert await b.list_locks() == []
        assert not waiter.done()
        await a.free_locks()
        assert (await waiter).granted
        await a.close()
        await b.close()

    asyncio.run(go())


def test_connection_close_withdraws_waiting_request(wconfd, raw_factory):
    a = client(wconfd, "a")
    a.try_update_locks([["node/n1", "exclusive"]])
    conn = identified_raw(raw_factory, wconfd.socket)
    conn.send(
        b'{"jsonrpc":"2.0","method":"update_locks_waiting","params":{"request":[["node/n1","shared"]]},"id":2}\n'
    )
    deadline = time.monotonic() + 5
    while not a.list_all_locks().pending:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    conn.close()
    deadline = time.monotonic() + 5
    while a.list_all_locks().pending:
        assert time.monotonic() < deadline
        time.sleep(0.02)


def test_a_release_whose_caller_hangs_up_still_answers_the_granted_waiter(wconfd, raw_factory):
    """The releaser closes its connection right after sending the release: its call is
    cancelled, but the release is durable and granted the lock to the waiter, whose call
    must be answered (it waited forever when the grant was answered by the releaser's
    call after its commit returned)."""
    conn = identified_raw(raw_factory, wconfd.socket)
    taken = conn.call(
        b'{"jsonrpc":"2.0","method":"try_update_locks","params":{"request":[["node/n1","exclusive"]]},"id":2}\n'
    )
    assert taken["result"] == []
    observer = client(wconfd, "observer")

    async def wait_for_the_release() -> tuple[bool, str]:
        w = AsyncWConfdClient(wconfd.socket, name="w")
        waiter = asyncio.ensure_future(w.update_locks_waiting([["node/n1", "exclusive"]]))
        deadline = time.monotonic() + 5
        while not observer.list_all_locks().pending:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.02)
        conn.send(
            b'{"jsonrpc":"2.0","method":"try_update_locks","params":{"request":[["node/n1","release"]]},"id":3}\n'
        )
        conn.close()
        result = await asyncio.wait_for(waiter, 10)
        held = await w.list_locks()
        await w.close()
        return result.granted, held

    granted, held = asyncio.run(wait_for_the_release())
    assert granted and held == [["node/n1", "exclusive"]]


WAIT_N1 = (
    b'{"jsonrpc":"2.0","method":"update_locks_waiting",'
    b'"params":{"request":[["node/n1","exclusive"]],"timeout":%s},"id":2}\n'
)


def wait_until(check, what):
    deadline = time.monotonic() + 5
    while not check():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def two_calls_waiting(wconfd, raw_factory, first_timeout: bytes, second_timeout: bytes):
    """Client "a" holds node/n1; this process waits for it on one raw connection, then
    re-issues the same wait on a second one (as a stub does after a reconnect).
    Returns (a, first connection, second connection)."""
    a = client(wconfd, "a")
    a.try_update_locks([["node/n1", "exclusive"]])
    first = identified_raw(raw_factory, wconfd.socket)
    first.send(WAIT_N1 % first_timeout)
    wait_until(lambda: a.list_all_locks().pending, "the first call never queued")
    second = identified_raw(raw_factory, wconfd.socket)
    second.send(WAIT_N1 % second_timeout)
    return a, first, second


def test_a_reissued_wait_outlives_the_first_call_hanging_up(wconfd, raw_factory):
    """A stub re-issues a wait on a new connection while the old one is still open: the
    old call ending must not withdraw the request the new call waits for."""
    a, first, second = two_calls_waiting(wconfd, raw_factory, b"null", b"null")

    def connections() -> int:
        return next(c.connections for c in a.list_clients() if c.name == "raw")

    wait_until(lambda: connections() == 2, "the second connection was not counted")
    first.close()
    wait_until(lambda: connections() == 1, "wconfd never noticed the first one closing")
    assert [p.client_id for p in a.list_all_locks().pending] == [
        c.client_id for c in a.list_clients() if c.name == "raw"
    ]
    a.try_update_locks([["node/n1", "release"]])
    answer = json.loads(second.line())
    assert answer == {"jsonrpc": "2.0", "result": {"granted": True, "blockers": []}, "id": 2}


def test_a_timeout_answers_every_call_waiting_for_the_request(wconfd, raw_factory):
    """Two calls wait for one request (a re-issue); the one with the shorter timeout
    withdraws it, and both are answered (the longer one waited forever before)."""
    a, patient, hasty = two_calls_waiting(wconfd, raw_factory, b"60", b"0.2")
    refused = {"jsonrpc": "2.0", "result": {"granted": False, "blockers": [a.client_id]}, "id": 2}
    assert json.loads(hasty.line()) == refused
    assert json.loads(patient.line()) == refused
    assert not a.list_all_locks().pending


def test_dead_holder_releases_at_once(wconfd):
    proc, holder_id = spawn_holder(wconfd.socket, "holder", [["node/n1", "exclusive"]])
    b = client(wconfd, "b")
    assert b.try_update_locks([["node/n1", "exclusive"]]) == [holder_id]

    async def wait_and_kill():
        w = AsyncWConfdClient(wconfd.socket, name="w")
        waiter = asyncio.ensure_future(w.update_locks_waiting([["node/n1", "exclusive"]]))
        await asyncio.sleep(0.1)
        start = time.monotonic()
        proc.kill()
        result = await waiter
        elapsed = time.monotonic() - start
        await w.close()
        return result, elapsed

    result, elapsed = asyncio.run(wait_and_kill())
    proc.wait()
    assert result.granted
    assert elapsed < 0.1
    ids = [c.client_id for c in b.list_clients()]
    assert holder_id not in ids


def test_list_clients_and_cleanup(wconfd):
    proc, holder_id = spawn_holder(wconfd.socket, "holder", [["node/n1", "shared"]])
    a = client(wconfd, "a")
    a.try_update_locks([["node/n2", "exclusive"]])
    infos = {c.client_id: c for c in a.list_clients()}
    assert infos[holder_id].locks == [["node/n1", "shared"]]
    assert infos[holder_id].pid == proc.pid
    assert infos[a.client_id].connections == 1
    assert infos[a.client_id].name == "a"
    proc.send_signal(signal.SIGSTOP)  # cleanup must not take a stopped process for dead
    assert a.cleanup_dead_clients() == []
    proc.kill()
    proc.wait()
    # pidfd usually wins the race; cleanup then finds nothing more to do.
    deadline = time.monotonic() + 2
    while holder_id in {c.client_id for c in a.list_clients()}:
        a.cleanup_dead_clients()
        assert time.monotonic() < deadline
        time.sleep(0.01)


def test_closing_connection_keeps_locks_while_process_lives(wconfd):
    a = client(wconfd, "a")
    a.try_update_locks([["node/n1", "exclusive"]])
    a.close()
    other = client(wconfd, "a")  # same identity, new connection
    assert other.list_locks() == [["node/n1", "exclusive"]]
    other.free_locks()
    other.close()
    watcher = client(wconfd, "w")
    assert all(c.name != "a" for c in watcher.list_clients())


def test_huge_timeouts_are_accepted(wconfd):
    a = client(wconfd, "a")
    result = a.update_locks_waiting([["node/n1", "exclusive"]], timeout=1e300)
    assert result.granted

    async def blocked_then_granted():
        b = AsyncWConfdClient(wconfd.socket, name="b")
        wait = asyncio.ensure_future(b.update_locks_waiting([["node/n1", "shared"]], timeout=1e300))
        await asyncio.sleep(0.1)
        await asyncio.get_running_loop().run_in_executor(None, a.free_locks)
        assert (await wait).granted
        await b.close()

    asyncio.run(blocked_then_granted())
    with pytest.raises(errors.InvalidParams, match="timeout"):
        a.update_locks_waiting([["node/n2", "exclusive"]], timeout=-1)
