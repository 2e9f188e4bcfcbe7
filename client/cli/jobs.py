"""`lw job …`, and the one way every command submits a job and waits for it.

`submit_and_wait` is what `lw node add`, `lw instance migrate`, `lw debug delay`,
`lw job submit` … all use: submit the opcodes to luxid, then (unless `--submit`) follow the
job with `wait_for_job_change`, printing its log as it grows, and turn the final status into
the exit code (0 success, 1 error, canceled or rejected).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec

from client.cli.context import EXIT_INTERRUPTED, EXIT_OK, Context, Failed, UsageError
from client.cli.output import Fields, format_value, print_record, print_table
from client.vocabulary import FINALIZED_STATUSES

JOB_FIELDS = Fields(
    known=[
        "id",
        "status",
        "priority",
        "summary",
        "ops",
        "opstatus",
        "opresult",
        "oplog",
        "oppriority",
        "opstart",
        "opexec",
        "opend",
        "received_ts",
        "start_ts",
        "end_ts",
        "archived",
        "pending_reason",
        "process_id",
        "depends",
    ],
    default=("id", "status", "priority", "summary"),
)
# How long one wait_for_job_change call may block before we ask again.
WAIT_SECONDS = 30.0
_FOLLOW_FIELDS = ["status", "pending_reason"]

Opcode = dict[str, Any]


# -- building and submitting ---------------------------------------------------------------


def opcode(op_id: str, args: argparse.Namespace, **params: Any) -> Opcode:
    """An opcode with the given parameters (None ones left out) and the common
    `--priority`/`--reason` options applied."""
    op: Opcode = {"OP_ID": op_id, **{k: v for k, v in params.items() if v is not None}}
    return with_common_options(op, args)


def with_common_options(op: Opcode, args: argparse.Namespace) -> Opcode:
    """Apply `--priority` and `--reason` (appended to the opcode's reason trail)."""
    if getattr(args, "priority", None) is not None:
        op["priority"] = args.priority
    reason = getattr(args, "reason", None)
    if reason:
        trail = list(op.get("reason") or [])
        trail.append([f"lw:client:lw-{args.command}", reason, time.time_ns()])
        op["reason"] = trail
    return op


def submit_and_wait(ctx: Context, args: argparse.Namespace, ops: list[Opcode]) -> int:
    """Submit one job; with `--submit` print its id, else follow it to the end.

    Returns 0 when the job succeeded; raises Failed when it failed, was canceled or was
    rejected by a filter.
    """
    job_id = ctx.luxi.submit_job(ops=ops)
    if getattr(args, "submit", False):
        ctx.out(str(job_id))
        return EXIT_OK
    try:
        ctx.note(f"job {job_id} submitted")  # from here on, Ctrl-C leaves the job running
        follow(ctx, job_id)
    except KeyboardInterrupt:
        ctx.note(
            f"lw: stopped waiting; job {job_id} goes on (follow it with `lw job watch {job_id}`, "
            f"stop it with `lw job cancel {job_id}`)"
        )
        return EXIT_INTERRUPTED
    return check_outcome(ctx, job_id)


def follow(ctx: Context, job_id: int, *, show_status: bool = False) -> str:
    """Print a job's log until it is finalized, and on stderr why it waits (if queued
    with a pending reason), its final status and, with `show_status`, every status change.
    Returns the final status.  Event-driven: each call returns as soon as the job changes."""
    values: list[Any] | None = None
    serial: int | None = None
    while True:
        change = ctx.luxi.wait_for_job_change(
            job_id=job_id,
            fields=_FOLLOW_FIELDS,
            prev_values=values,
            prev_log_serial=serial,
            timeout=WAIT_SECONDS,
        )
        if isinstance(change, str):  # "nochange"
            continue
        for entry in change.log:
            serial = entry[0] if serial is None else max(serial, entry[0])
            ctx.out(format_log_entry(entry))
        if change.values != values:
            status, pending = change.values
            # Always say why a job does not start (a PAUSE filter, a full rate-limit bucket …).
            held = status == "queued" and pending
            if show_status or held or status in FINALIZED_STATUSES:
                ctx.note(f"job {job_id}: {status}" + (f" ({pending})" if held else ""))
            values = list(change.values)
        if values is not None and values[0] in FINALIZED_STATUSES:
            return str(values[0])


def format_log_entry(entry: Sequence[Any]) -> str:
    """`[serial, timestamp, type, message]` as `YYYY-mm-dd HH:MM:SS message`."""
    _, stamp, kind, message = entry
    text = message if isinstance(message, str) else msgspec.json.encode(message).decode()
    prefix = "" if kind == "message" else f"[{kind}] "
    return f"{format_value('start_ts', stamp)} {prefix}{text}"


def result_text(result: Any) -> str:
    """An opcode's error result as a sentence."""
    if isinstance(result, str):
        return result
    if isinstance(result, list | tuple) and len(result) == 2 and isinstance(result[0], str):
        detail = result[1]
        if isinstance(detail, list | tuple) and detail and isinstance(detail[0], str):
            detail = detail[0]
        return f"{result[0]}: {detail}"
    return msgspec.json.encode(result).decode()


def check_outcome(ctx: Context, job_id: int) -> int:
    """0 if the job succeeded; Failed naming the opcode and its error otherwise."""
    rows = ctx.luxi.query_jobs(ids=[job_id], fields=["status", "opstatus", "opresult", "summary"])
    row = rows[0] if rows else None
    if row is None:
        raise Failed(f"job {job_id} vanished (archived meanwhile?)")
    status, opstatus, opresult, summary = row
    if status == "success":
        return EXIT_OK
    for index, (op_status, result) in enumerate(zip(opstatus, opresult, strict=False)):
        if op_status in ("error", "canceled"):
            what = summary[index] if index < len(summary) else f"opcode {index}"
            verb = "failed" if op_status == "error" else "was canceled"
            raise Failed(f"job {job_id} {verb} in {what}: {result_text(result)}")
    raise Failed(f"job {job_id} ended {status}")


# -- lw job … --------------------------------------------------------------------------------


def job_list(ctx: Context, args: argparse.Namespace) -> int:
    """lw job list"""
    fields = JOB_FIELDS.choose(args.output)
    rows = ctx.luxi.query_jobs(ids=None, fields=fields)
    print_table(ctx, args, fields, [row for row in rows if row is not None])
    return EXIT_OK


def job_info(ctx: Context, args: argparse.Namespace) -> int:
    """lw job info ID"""
    fields = JOB_FIELDS.choose(args.output, record=True)
    rows = ctx.luxi.query_jobs(ids=[args.id], fields=fields)
    if not rows or rows[0] is None:
        raise Failed(f"no job {args.id} (see `lw job list`)")
    print_record(ctx, args, fields, rows[0])
    return EXIT_OK


def job_why(ctx: Context, args: argparse.Namespace) -> int:
    """lw job why ID: what holds the job, one link a line, each indented two spaces more
    than the one it hangs from (docs/contracts.md#why-a-job-waits)."""
    answer = ctx.luxi.why_job(job_id=args.id)
    for depth, step in enumerate(answer.chain):
        ctx.out("  " * depth + step.text)
    if not answer.chain:
        ctx.note(f"job {args.id} is {answer.status}: nothing holds it")
    return EXIT_OK


def job_watch(ctx: Context, args: argparse.Namespace) -> int:
    """lw job watch ID: follow live; the exit code says how it ended."""
    try:
        status = follow(ctx, args.id, show_status=True)
    except KeyboardInterrupt:
        ctx.note(f"lw: stopped watching job {args.id}")
        return EXIT_INTERRUPTED
    return EXIT_OK if status == "success" else check_outcome(ctx, args.id)


def job_cancel(ctx: Context, args: argparse.Namespace) -> int:
    """lw job cancel ID [--kill]"""
    ok, message = ctx.luxi.cancel_job(job_id=args.id, kill=args.kill)
    if not ok:
        raise Failed(f"job {args.id} not canceled: {message}")
    ctx.out(str(message) or f"job {args.id} canceled")
    return EXIT_OK


def job_archive(ctx: Context, args: argparse.Namespace) -> int:
    """lw job archive ID"""
    if not ctx.luxi.archive_job(job_id=args.id):
        raise Failed(
            f"job {args.id} not archived: it has not finished yet (or is archived already)"
        )
    ctx.out(f"job {args.id} archived")
    return EXIT_OK


def job_priority(ctx: Context, args: argparse.Namespace) -> int:
    """lw job priority ID PRIORITY"""
    ok, message = ctx.luxi.change_job_priority(job_id=args.id, priority=args.priority)
    if not ok:
        raise Failed(f"priority of job {args.id} not changed: {message}")
    ctx.out(str(message) or f"job {args.id}: priority {args.priority}")
    return EXIT_OK


def read_ops(source: str) -> list[Opcode]:
    """The opcodes in a JSON file (or stdin for "-"): a list of opcodes or one opcode."""
    import json  # only here: its error messages name line and column

    try:
        text = sys.stdin.read() if source == "-" else Path(source).read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {source}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise UsageError(f"{source} is not JSON: {exc}") from None
    ops = [data] if isinstance(data, dict) else data
    if not isinstance(ops, list) or not ops:
        raise UsageError(f"{source}: expected a non-empty JSON list of opcodes or one opcode")
    for i, op in enumerate(ops):
        if not isinstance(op, dict) or not isinstance(op.get("OP_ID"), str):
            raise UsageError(f'{source}: opcode {i} is not an object with an "OP_ID"')
    return ops


def job_submit(ctx: Context, args: argparse.Namespace) -> int:
    """lw job submit FILE.json"""
    ops = [with_common_options(op, args) for op in read_ops(args.file)]
    return submit_and_wait(ctx, args, ops)
