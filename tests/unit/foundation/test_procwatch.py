"""Death detection (docs/contracts.md#death-detection): pidfd reports within milliseconds; the sweep
backs it up."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time

import psutil
import pytest

from client import identity
from client._server.procwatch import ProcessWatcher
from client.identity import ProcessKey, is_alive

pytestmark = pytest.mark.timeout(30)


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])


def _key(proc: subprocess.Popen[bytes]) -> ProcessKey:
    return ProcessKey(proc.pid, psutil.Process(proc.pid).create_time())


def test_is_alive_checks_start_time_and_zombies():
    proc = _sleeper()
    key = _key(proc)
    assert is_alive(key)
    assert not is_alive(ProcessKey(proc.pid, key.start_time - 10))
    proc.kill()
    time.sleep(0.2)  # not reaped yet: a zombie
    assert psutil.Process(proc.pid).status() == psutil.STATUS_ZOMBIE
    assert not is_alive(key)
    proc.wait()
    assert not is_alive(key)


async def _watch_kill(watcher_kwargs: dict, disable_pidfd: bool = False) -> float:
    died: asyncio.Queue[ProcessKey] = asyncio.Queue()
    watcher = ProcessWatcher(died.put_nowait, **watcher_kwargs)
    if disable_pidfd:
        watcher._open_pidfd = staticmethod(lambda pid: None)  # type: ignore[method-assign]
    watcher.start()
    proc = _sleeper()
    key = _key(proc)
    watcher.watch(key)
    await asyncio.sleep(0.05)
    assert died.empty()
    start = time.monotonic()
    proc.kill()  # never reaped while we wait: a zombie must count as dead
    got = await asyncio.wait_for(died.get(), 10)
    elapsed = time.monotonic() - start
    assert got == key
    watcher.stop()
    proc.wait()
    return elapsed


@pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="no pidfd on this platform")
def test_pidfd_reports_death_within_100ms():
    assert asyncio.run(_watch_kill({"sweep_interval": 60})) < 0.1


def test_sweep_reports_death_without_pidfd():
    assert asyncio.run(_watch_kill({"sweep_interval": 0.2}, disable_pidfd=True)) < 1.0


def test_already_dead_or_reused_pid_is_reported():
    async def go() -> list[ProcessKey]:
        died: list[ProcessKey] = []
        watcher = ProcessWatcher(died.append, sweep_interval=60)
        me = ProcessKey(os.getpid(), psutil.Process().create_time())
        watcher.watch(ProcessKey(me.pid, me.start_time - 100))  # same pid, other start time
        watcher.watch(me)
        await asyncio.sleep(0.05)
        watcher.stop()
        return died

    died = asyncio.run(go())
    assert [k.start_time for k in died] == [psutil.Process().create_time() - 100]


def test_unwatch_and_sweep_return_value():
    async def go() -> tuple[list[ProcessKey], list[ProcessKey]]:
        died: list[ProcessKey] = []
        watcher = ProcessWatcher(died.append, sweep_interval=60)
        watcher._open_pidfd = staticmethod(lambda pid: None)  # type: ignore[method-assign]
        a, b = _sleeper(), _sleeper()
        ka, kb = _key(a), _key(b)
        watcher.watch(ka)
        watcher.watch(kb)
        watcher.unwatch(kb)
        a.kill()
        b.kill()
        a.wait()
        b.wait()
        swept = watcher.sweep()
        await asyncio.sleep(0)
        return swept, died

    swept, died = asyncio.run(go())
    assert len(swept) == 1 and died == swept


def test_start_time_of_missing_process():
    assert identity.start_time_of(2**22 + 12345) is None


def test_start_time_agrees_with_psutil_even_for_odd_names() -> None:
    """The /proc reading (boot time cached) gives psutil's start time, also for a process
    whose name holds spaces and parentheses; a zombie is not alive, a reaped one unknown."""
    start_time_of = identity.start_time_of
    assert start_time_of(os.getpid()) == psutil.Process().create_time()
    code = "open('/proc/self/comm', 'w').write('a) b (c'); print(flush=True); input()"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE)  # fmt: skip
    assert child.stdout is not None and child.stdin is not None
    child.stdout.readline()
    assert psutil.Process(child.pid).name() == "a) b (c"
    start = start_time_of(child.pid)
    assert start == psutil.Process(child.pid).create_time()
    key = ProcessKey(child.pid, start)
    assert is_alive(key) and not is_alive(ProcessKey(child.pid, start - 5))
    child.stdin.close()
    while psutil.Process(child.pid).status() != psutil.STATUS_ZOMBIE:
        time.sleep(0.01)
    assert not is_alive(key)
    child.wait()
    assert start_time_of(child.pid) is None and not is_alive(key)
