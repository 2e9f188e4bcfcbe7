"""first_directive: what luxid hands a forked job process with its spawn request instead
of waiting for its hello — only a directive to run an opcode, and only the one the hello
would get from the job as its process will find it (recorded by start_job)."""

from __future__ import annotations

from client.api.luxi import Hello
from luxid.jobs import (
    cancel_job,
    finish_opcode,
    mark_opcode_running,
    new_job,
    pause_job,
    process_exited,
    start_job,
)
from luxid.jobs.reports import apply_report, first_directive

OPS = [{"OP_ID": "OP_TEST_DELAY", "duration": 0}, {"OP_ID": "OP_TEST_DELAY", "duration": 1}]


def hello_after_start(job, now: float = 5.0):  # type: ignore[no-untyped-def]
    """What the process's own hello would be answered once luxid recorded it."""
    return apply_report(start_job(job, now, pid=4242, pid_start=4.0), Hello(), now)[1]


def test_a_new_job_gets_its_first_opcode_and_all_opcodes() -> None:
    job = new_job(7, OPS, now=1.0)
    first = first_directive(job, 2.0)
    assert first is not None and not first.stop
    assert (first.index, first.priority) == (0, 0)
    assert first.ops == [op.input for op in job.ops]  # as submitted, reason trail added
    assert first == hello_after_start(job)


def test_a_job_resumed_after_a_pause_asks_itself() -> None:
    job = start_job(new_job(7, OPS, now=1.0), 2.0, pid=4242, pid_start=1.5)
    job = finish_opcode(pause_job(mark_opcode_running(job, 0, 3.0)), 0, 4.0, True)
    job = process_exited(job, 5.0)
    assert job.paused  # until start_job records the new process
    assert first_directive(job, 6.0) is None
    assert hello_after_start(job).index == 1  # what the process then hears


def test_a_canceled_or_canceling_job_gets_no_directive() -> None:
    running = mark_opcode_running(start_job(new_job(7, OPS, now=1.0), 2.0, 4242, 1.5), 0, 3.0)
    canceling = cancel_job(running, 4.0).job
    assert first_directive(canceling, 5.0) is None  # its hello would complete the cancel
    canceled = cancel_job(new_job(8, OPS, now=1.0), 2.0).job
    assert first_directive(canceled, 3.0) is None
