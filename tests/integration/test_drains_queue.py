"""The queue drain (docs/contracts.md#queue-drain) and the `lw` drain commands through the real
daemons.

Queue drains: soft (new jobs held by a visible PAUSE rule), hard (refused by a REJECT
rule), completion when the jobs accepted before the rule finish, the deadline canceling
them, undrain, and `query_queue_info` showing the drain next to the flag.  The CLI:
`lw node drain` followed on a pseudo-terminal (timestamped events, a progress bar).
"""

from __future__ import annotations

import os
import pty
import re
import select
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay
from test_cli import LW
from test_drains_node import add_node, create, follow, placed
from test_drains_node import stack as stack  # the fixture
from test_jobproc_opcodes import run as ok

from client import WConfdClient

pytestmark = pytest.mark.timeout(180)


def test_soft_drain_holds_new_jobs_until_undrain(stack: Stack) -> None:
    before = stack.submit(delay(1.0))
    stack.wait_op_running(before)
    started = stack.lc.drain_queue(mode="soft", message="maintenance")
    assert started.mode == "soft" and started.total == 1 and started.remaining == 1
    rules = stack.lc.query_filters(uuids=None, fields=None)
    ((uuid, watermark, _priority, predicates, action, reason),) = rules
    assert predicates == [["jobid", [">", "id", "watermark"]]] and action == "PAUSE"
    assert watermark == before and reason[0][:2] == ["lw:drain", "maintenance"]
    held = stack.submit(delay(0))
    info = stack.lc.query_queue_info()
    assert info.drained is False and info.queue_drain is not None
    assert info.queue_drain.mode == "soft" and info.filters == 1
    done, events = follow(stack, "queue", lambda s: s.status == "complete")
    assert done.remaining == 0 and not done.deadline_reached
    assert any(str(e[2]).endswith("queue drain complete") for e in events)
    assert stack.status(before) == "success"
    assert stack.status(held) == "queued"
    assert stack.field(held, "pending_reason") == f"paused by filter {uuid}"
    stack.lc.undrain_queue()
    assert stack.wait_final(held) == "success"
    assert stack.lc.query_filters(uuids=None, fields=None) == []
    assert stack.lc.query_queue_info().queue_drain.status == "complete"  # type: ignore[union-attr]


def test_hard_drain_refuses_new_jobs_and_its_deadline_cancels_the_rest(stack: Stack) -> None:
    long = stack.submit(delay(60))
    stack.wait_op_running(long)
    queued_behind = stack.submit(delay(0, on_nodes=["x"]), delay(60, on_nodes=["x"]))
    started = stack.lc.drain_queue(mode="hard", deadline=1.0)
    assert started.total == 2 and started.deadline is not None
    refused = stack.submit(delay(0))
    assert stack.wait_final(refused) == "canceled"
    assert "rejected by filter" in str(stack.field(refused, "opresult"))
    done, events = follow(stack, "queue", lambda s: s.status != "draining", timeout=60)
    assert done.status == "complete" and done.deadline_reached
    assert stack.status(long) == "canceled" and stack.status(queued_behind) == "canceled"
    fired = next(e for e in events if str(e[2]).startswith("deadline passed"))
    assert 0 <= fired[1] - started.deadline < 1.0
    stack.lc.undrain_queue()
    assert stack.wait_final(stack.submit(delay(0))) == "success"


def test_a_job_that_ignores_the_cancel_is_killed_after_the_grace_time(
    daemon_factory: Any,
) -> None:
    """At the deadline every job accepted before the drain is canceled; an interruptible
    one ends `canceled` at once, a non-interruptible one (OP_INSTANCE_REPLACE_DISKS's
    copy) keeps running until `--drain-kill-after` seconds later, when luxid kills it:
    it ends `error` ("killed"), its locks are freed, and the drain completes."""
    grace = 2.0
    stack = Stack(daemon_factory, "--drain-kill-after", str(grace))
    try:
        ok(stack, add_node("n1"), create("vm", 256, "n1"))
        stubborn = stack.submit({"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": "vm",
                                 "mode": "replace_on_primary", "duration": 120})  # fmt: skip
        polite = stack.submit(delay(120))
        stack.wait_op_running(stubborn)
        stack.wait_op_running(polite)
        started = stack.lc.drain_queue(mode="hard", deadline=0.5)
        assert started.total == 2 and started.deadline is not None
        assert stack.wait_final(polite) == "canceled"
        assert stack.status(stubborn) in ("running", "canceling")
        done, events = follow(stack, "queue", lambda s: s.status != "draining", timeout=60)
        assert done.status == "complete" and done.deadline_reached and done.remaining == 0
        assert stack.status(stubborn) == "error"
        assert "killed" in str(stack.field(stubborn, "opresult"))
        end = float(stack.field(stubborn, "end_ts"))
        assert end - started.deadline >= grace, (end, started.deadline)
        text = [str(e[2]) for e in events]
        assert f"1 jobs still running {grace:g} s after the deadline: killed" in text, text
        stack.until(lambda: not stack.job_locks(), timeout=30)
    finally:
        stack.close()


def test_undrain_without_a_drain_is_a_no_op(stack: Stack) -> None:
    assert stack.lc.undrain_queue() is None
    assert stack.lc.query_drains() == []


def _pty_run(argv: list[str], timeout: float = 60.0) -> tuple[int, str]:
    """Run `argv` with stdout and stderr on a pseudo-terminal; (exit code, output)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(argv, stdout=follower, stderr=follower, stdin=subprocess.DEVNULL)
    os.close(follower)
    chunks: list[bytes] = []
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        ready, _, _ = select.select([leader], [], [], 0.5)
        if ready:
            try:
                data = os.read(leader, 65536)
            except OSError:  # the terminal closed: the process ended
                break
            if not data:
                break
            chunks.append(data)
        elif proc.poll() is not None:
            break
    os.close(leader)
    return proc.wait(timeout=10), b"".join(chunks).decode(errors="replace")


def test_lw_node_drain_follows_on_a_terminal(stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"))
    ok(stack, *(create(f"web{i}", 256, "n1") for i in range(3)))
    run_dir, state_dir = stack.wconfd.run_dir, stack.wconfd.state_dir
    base = [LW, "--run-dir", str(run_dir), "--state-dir", str(state_dir)]
    code, out = _pty_run([*base, "node", "drain", "n1", "--deadline", "15m",
                          "--max-parallel", "2"])  # fmt: skip
    assert code == 0, out
    assert "\x1b[K" in out and "[" + "#" * 30 + "] 3/3 moved" in out  # the bar, redrawn
    lines = out.replace("\r\x1b[K", "\n").splitlines()
    stamped = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ")
    assert any(stamped.match(line) and "drain strategy set (deadline" in line for line in lines)
    assert any(stamped.match(line) and "web1: migrated to n2" in line for line in lines)
    assert "drain of node/n1 complete: 3/3 moved" in out
    assert set(placed(stack).values()) == {"n2"}
    status = subprocess.run([*base, "node", "drain-status", "n1"], capture_output=True,
                            text=True, timeout=60)  # fmt: skip
    assert status.returncode == 0 and "complete" in status.stdout
    # not a terminal: plain lines, no bar
    ok(stack, add_node("n3"))
    plain = subprocess.run([*base, "node", "drain", "n3", "--no-deadline"],
                           capture_output=True, text=True, timeout=60)  # fmt: skip
    assert plain.returncode == 0 and "\x1b" not in plain.stdout
    assert "drain of node/n3 complete: 0/0 moved" in plain.stdout


def test_lw_queue_drain_soft_waits_for_accepted_jobs(stack: Stack) -> None:
    job = stack.submit(delay(0.5))
    run_dir, state_dir = stack.wconfd.run_dir, stack.wconfd.state_dir
    base = [LW, "--run-dir", str(run_dir), "--state-dir", str(state_dir)]
    done = subprocess.run([*base, "queue", "drain", "--soft", "--deadline", "15m", "--wait"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "queue drain (soft)" in done.stdout and "1/1 finished" in done.stdout
    assert stack.status(job) == "success"
    undrained = subprocess.run([*base, "queue", "undrain"], capture_output=True, text=True,
                               timeout=60)  # fmt: skip
    assert undrained.returncode == 0, undrained.stderr
    assert stack.lc.query_filters(uuids=None, fields=None) == []


def test_draining_the_queue_again_keeps_the_jobs_it_accepted_and_held(stack: Stack) -> None:
    """A change of message and deadline, then of mode, on an active queue drain: its
    start and watermark stay, the job accepted before it is still the one it waits for,
    and the job it holds stays held (the rule's watermark moves when the rule is put
    again, so the rule carries the drain's own), then is refused once it is hard."""
    with WConfdClient(stack.wconfd.socket, name="test-holder") as holder:
        holder.update_locks_waiting([["node/gate", "exclusive"]], timeout=30)
        accepted = stack.submit(delay(0, on_nodes=["gate"]))  # waits for node/gate
        stack.wait_status(accepted, "waiting")
        started = stack.lc.drain_queue(mode="soft", deadline=600, message="first")
        assert (started.total, started.jobs) == (1, [accepted])
        ((uuid, watermark, *_),) = stack.lc.query_filters(uuids=None, fields=None)
        held = stack.submit(delay(0))
        assert stack.field(held, "pending_reason") == f"paused by filter {uuid}"

        before = time.time()
        again = stack.lc.drain_queue(mode="soft", deadline=1200, message="second")
        assert (again.started_at, again.total, again.jobs) == (started.started_at, 1, [accepted])
        assert again.message == "second" and again.deadline is not None
        assert before + 1200 <= again.deadline <= time.time() + 1200
        ((same, _, _, predicates, action, reason),) = stack.lc.query_filters(
            uuids=None, fields=None
        )
        assert (same, action, reason[0][:2]) == (uuid, "PAUSE", ["lw:drain", "second"])
        assert predicates == [["jobid", [">", "id", watermark]]]

        hard = stack.lc.drain_queue(mode="hard", deadline=None, message="second")
        assert (hard.mode, hard.total, hard.jobs) == ("hard", 1, [accepted])
        assert stack.wait_final(held) == "canceled"  # REJECT cancels the held job
        assert stack.field(held, "opresult") == [f"rejected by filter {uuid}"]
        assert stack.status(accepted) == "waiting"
        holder.free_locks()
    assert stack.wait_final(accepted) == "success"
    done, events = follow(stack, "queue", lambda s: s.status == "complete")
    assert done.started_at == started.started_at and (done.total, done.remaining) == (1, 0)
    assert f"filter {uuid}: jobs after {watermark} are refused now" in [e[2] for e in events]
    stack.lc.undrain_queue()
