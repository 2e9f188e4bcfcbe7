"""wconfd's writes belong to the daemons' user (docs/contracts.md#who-may-call): a peer of
another uid (SO_PEERCRED) may identify by name and read, but not identify as a job, take
or change locks, write the configuration or reserve.

The second uid is a real process: a forked child that drops to `nobody`'s uid (keeping group 0,
which the socket's mode 0660 lets in) before it connects, so the kernel reports that uid.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import tempfile
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from client import WConfdClient, errors
from client.identity import start_time_of

pytestmark = [
    pytest.mark.timeout(60),
    pytest.mark.skipif(os.geteuid() != 0, reason="needs root to start a process as a second uid"),
]


def _attempt(call: Callable[[], Any]) -> dict[str, str]:
    try:
        return {"ok": repr(call())}
    except errors.RpcError as exc:
        return {"error": exc.type_name, "message": exc.message}


def _probe(sock: Path) -> dict[str, dict[str, str]]:
    """What the second uid tries, each answered as {"ok": result} or {"error", "message"}."""
    named = WConfdClient(sock, name="operator")
    as_job = WConfdClient(sock, job_id=1)
    bgl = [("cluster/BGL", "exclusive")]
    return {
        "identify_by_name": _attempt(named.ping),
        "read_config": _attempt(lambda: named.get_config()["cluster"]["name"]),
        "list_locks": _attempt(named.list_locks),
        "identify_as_job": _attempt(as_job.ping),
        "bgl": _attempt(lambda: named.try_update_locks(bgl)),
        "wait_bgl": _attempt(lambda: named.update_locks_waiting(bgl)),
        "add_node": _attempt(lambda: named.add_object("node", {"name": "evil"})),
        "reserve": _attempt(lambda: named.reserve("mac", "aa:00:00:00:00:01")),
        "free_locks": _attempt(named.free_locks),
        "cleanup": _attempt(named.cleanup_dead_clients),
    }


def _other_uid() -> int:
    try:
        return pwd.getpwnam("nobody").pw_uid
    except KeyError:
        return 65534


@pytest.fixture
def shared_root() -> Iterator[Path]:
    """A daemon root the second uid can reach: group 0 may traverse it (tmp_path's parents
    are root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="lw-uid-"))
    root.chmod(0o750)
    yield root
    shutil.rmtree(root, ignore_errors=True)


def _run_as(uid: int, probe: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`probe()` in a forked child that first becomes `uid` (group 0), so the kernel
    reports that uid to the daemon; its JSON answer through a pipe.  A fork, not a new
    interpreter: the venv's Python may live where the second uid cannot read."""
    start_time_of(os.getpid())  # its lazy imports, done where the stdlib is readable
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_end)
            os.setgroups([])
            os.setgid(0)
            os.setuid(uid)
            os.write(write_end, json.dumps(probe()).encode())
            code = 0
        except BaseException:
            traceback.print_exc()
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0, "the probe failed"
    result: dict[str, Any] = json.loads(data)
    return result


def test_another_uid_reads_but_cannot_lock_write_or_be_a_job(daemon_factory, shared_root):
    wconfd = daemon_factory("wconfd", root=shared_root).start()
    uid = _other_uid()
    got = _run_as(uid, lambda: _probe(wconfd.socket))
    assert "ok" in got["identify_by_name"]
    assert got["read_config"] == {"ok": "'lockwarden'"}
    assert got["list_locks"] == {"ok": "[]"}
    refused = {
        "identify_as_job": "identify",
        "bgl": "try_update_locks",
        "wait_bgl": "update_locks_waiting",
        "add_node": "add_object",
        "reserve": "reserve",
        "free_locks": "free_locks",
        "cleanup": "cleanup_dead_clients",
    }
    own = os.geteuid()
    for probe, method in refused.items():
        assert got[probe] == {
            "error": "PermissionDenied",
            "message": f"only uid {own} (the daemons') or root may call {method}",
        }, probe
    # Nothing was taken: the daemon's own uid still gets the BGL at once.
    with WConfdClient(wconfd.socket, job_id=2) as job:
        assert job.try_update_locks([["cluster/BGL", "exclusive"]]) == []
