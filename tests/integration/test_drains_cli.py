"""The `lw` drain commands (docs/contracts.md#drains-for-operators) as a subprocess against the real
daemons.

`lw queue drain` alone is the drain flag, and `--message`/`--wait` without `--soft` or
`--deadline` are usage errors that change nothing; `lw node drain --detach` returns while
the drain goes on; `--disable [--keep-drained]` cancels it and undrains the node (or not);
Ctrl-C while following stops `lw`, not the drain.  A drain that cannot finish yet is one
whose only instance has no room anywhere (blocked until a node is added).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_cli import LW, Lw
from test_drains_node import add_node, create, drain_jobs, follow, placed
from test_drains_node import stack as stack  # the fixture: wconfd + luxid
from test_jobproc_opcodes import run as ok

from client.api.luxi import DrainStatus

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def lw(stack: Stack) -> Lw:
    return Lw(stack.wconfd.run_dir, stack.wconfd.state_dir)


def blocked_drain_setup(stack: Stack) -> None:
    """n1 with an instance of 4096 MiB that n2 (2048 MiB) cannot take."""
    ok(stack, add_node("n1"), add_node("n2", mtotal=2048))
    ok(stack, create("big", 4096, "n1"))


def n1_drain(stack: Stack) -> DrainStatus:
    (status,) = [d for d in stack.lc.query_drains() if d.target == "node/n1"]
    return status


def test_lw_queue_drain_alone_is_the_flag_and_message_or_wait_need_a_queue_drain(
    stack: Stack, lw: Lw
) -> None:
    lw.ok("queue", "drain")
    info = stack.lc.query_queue_info()
    assert info.drained is True and info.queue_drain is None and info.filters == 0
    lw.ok("queue", "undrain")
    assert stack.lc.query_queue_info().drained is False
    for extra, named in [
        (["--message", "upgrade"], "--message needs"),
        (["--wait"], "--wait needs"),
        (["--message", "upgrade", "--wait"], "--message and --wait need"),
    ]:
        err = lw.fails(2, "queue", "drain", *extra)
        assert f"lw queue drain: error: {named} --soft or --deadline" in err, err
        assert "drain flag, which has no message and nothing to wait for" in err
    info = stack.lc.query_queue_info()  # nothing was started nor set
    assert info.drained is False and info.queue_drain is None and info.filters == 0
    assert stack.lc.query_drains() == []
    usage = " ".join(lw.ok("queue", "drain", "--help").split())
    assert "Without --soft and --deadline: set the drain flag" in usage
    assert "--message and --wait need --soft or --deadline" in usage
    # with --deadline the message goes into the rule's reason (a hard queue drain)
    out = lw.ok("queue", "drain", "--deadline", "15m", "--message", "upgrade")
    assert "queue drain (hard): new jobs are refused" in out
    ((_, _, _, _, action, reason),) = stack.lc.query_filters(uuids=None, fields=None)
    assert action == "REJECT" and reason[0][:2] == ["lw:drain", "upgrade"]
    assert stack.lc.query_queue_info().drained is False  # the flag is another thing


@pytest.mark.parametrize("keep", [False, True])
def test_lw_node_drain_detach_returns_and_disable_cancels(stack: Stack, lw: Lw, keep: bool) -> None:
    blocked_drain_setup(stack)
    out = lw.ok("node", "drain", "n1", "--no-deadline", "--detach")
    assert out.startswith("draining n1: 0/1 moved") and "no deadline" in out, out
    assert n1_drain(stack).status == "draining"  # it goes on without lw
    follow(stack, "node/n1", lambda s: bool(s.blocked))
    assert stack.wc.get_object(kind="node", key="n1")["drained"] is True

    out = lw.ok("node", "drain", "n1", "--disable", *(["--keep-drained"] if keep else []))
    flag = "stays drained" if keep else "is being undrained"
    assert out.strip() == f"drain of n1: canceled; the node {flag}"
    canceled = n1_drain(stack)
    assert canceled.status == "canceled"
    # The OP_NODE_SET_PARAMS `drained: false` job is submitted with the cancel, or never.
    undrains = [j for j in drain_jobs(stack, canceled) if j["op"].get("drained") is False]
    if keep:
        assert undrains == []
        assert stack.wc.get_object(kind="node", key="n1")["drained"] is True
    else:
        (undrain,) = undrains
        assert stack.wait_final(undrain["id"]) == "success"
        assert stack.wc.get_object(kind="node", key="n1")["drained"] is False
    assert placed(stack) == {"big": "n1"}


def read_until(proc: subprocess.Popen[bytes], text: str, timeout: float = 60.0) -> str:
    """What `proc` wrote on stdout up to and including `text` (fails if it exits first)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    seen = ""
    end = time.monotonic() + timeout
    while text not in seen:
        left = end - time.monotonic()
        assert left > 0, f"no {text!r} from lw after {timeout} s; it wrote {seen!r}"
        ready, _, _ = select.select([fd], [], [], left)
        if ready:
            chunk = os.read(fd, 65536)
            assert chunk, f"lw exited {proc.wait()} before writing {text!r}; it wrote {seen!r}"
            seen += chunk.decode()
    return seen


def test_ctrl_c_stops_following_not_the_drain(stack: Stack) -> None:
    blocked_drain_setup(stack)
    base = [LW, "--run-dir", str(stack.wconfd.run_dir), "--state-dir", str(stack.wconfd.state_dir)]
    proc = subprocess.Popen(
        [*base, "node", "drain", "n1", "--no-deadline"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
    )
    try:
        read_until(proc, "drain strategy set (no deadline, max_parallel 1)")  # following now
        follow(stack, "node/n1", lambda s: bool(s.blocked))  # it cannot end by itself
        proc.send_signal(signal.SIGINT)
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.stderr is not None
    err = proc.stderr.read().decode()
    assert code == 130, err
    assert "stopped following; the drain of n1 goes on" in err
    assert "lw node drain n1 --disable" in err and "Traceback" not in err
    assert n1_drain(stack).status == "draining"
    ok(stack, add_node("n3"))  # room: the drain lw stopped following completes
    done, _ = follow(stack, "node/n1", lambda s: s.status != "draining")
    assert done.status == "complete" and placed(stack) == {"big": "n3"}
