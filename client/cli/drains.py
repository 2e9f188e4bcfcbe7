"""`lw node drain …`, `lw node drain-status`, `lw queue drain|undrain`
(docs/contracts.md#drains-for-operators).

`lw node drain NODE` starts (or changes) the drain and, unless `--detach`, follows it
until it ends: one timestamped line per event and, on a terminal, a progress bar
`moved/total` kept under them; plain lines only when the output is not a terminal.
Ctrl-C stops following, never the drain.  Exit 0 when the drain completed, 1 when it ended
with instances shut down, or was canceled.

`lw queue drain` without `--soft` and `--deadline` stays what it was, the drain flag
(docs/contracts.md#job-methods); with either it is a queue drain
(docs/contracts.md#queue-drain).  `--message` and `--wait` belong to a queue drain: the flag
has no message and nothing to wait for.
"""

from __future__ import annotations

import argparse
import contextlib
import time
from typing import Any, Literal, TextIO

from client import errors
from client.api.luxi import DrainChange, DrainStatus
from client.cli import drain_plan, queue
from client.cli.context import EXIT_INTERRUPTED, EXIT_OK, Context, Failed, UsageError
from client.cli.output import Fields, format_value, print_record, print_table, to_json
from client.durations import format_duration

# How long one wait_for_drain_change call may block before we ask again.
WAIT_SECONDS = 30.0
BAR_WIDTH = 30
_CLEAR_LINE = "\r\x1b[K"

DRAIN_FIELDS = Fields(
    known=[
        "target",
        "status",
        "start_at",
        "progress",
        "remaining",
        "running",
        "blocked",
        "deadline",
        "max_parallel",
        "mode",
        "message",
        "started_at",
        "updated_at",
        "completed_at",
        "deadline_reached",
        "shut_down",
        "jobs",
    ],
    default=(
        "target",
        "status",
        "start_at",
        "progress",
        "running",
        "blocked",
        "deadline",
        "message",
    ),
)
_TIMES = frozenset({"deadline", "start_at", "started_at", "updated_at", "completed_at"})


# -- following a drain -------------------------------------------------------------------------


def _unit(status: DrainStatus) -> tuple[str, str]:
    return ("jobs", "finished") if status.target == "queue" else ("instances", "moved")


def progress_text(status: DrainStatus) -> str:
    """`12/40 moved, 2 running, 1 blocked` (the queue: `3/5 finished`)."""
    _, done = _unit(status)
    text = f"{status.total - status.remaining}/{status.total} {done}"
    if status.running:
        text += f", {status.running} running"
    if status.blocked:
        text += f", {len(status.blocked)} blocked"
    return text


def progress_bar(status: DrainStatus, width: int = BAR_WIDTH) -> str:
    """`[##########....................] 12/40 moved, 2 running`."""
    done = status.total - status.remaining
    filled = width if status.total == 0 else width * done // status.total
    return f"[{'#' * filled}{'.' * (width - filled)}] {progress_text(status)}"


def event_line(event: list[Any]) -> str:
    """`[serial, timestamp, message]` as `YYYY-mm-dd HH:MM:SS message`."""
    _, stamp, message = event
    return f"{format_value('start_ts', stamp)} {message}"


class Follower:
    """Writes a drain's events as they arrive and, on a terminal, a progress bar below them
    (redrawn in place; an event line first clears it).  Not on a terminal: plain lines."""

    def __init__(self, out: TextIO, *, tty: bool) -> None:
        self.out = out
        self.tty = tty
        self._bar = False

    def show(self, change: DrainChange, *, since: float = 0.0) -> None:
        """Print the events of `change` (those at or after `since`), then the bar."""
        if self._bar:
            self.out.write(_CLEAR_LINE)
            self._bar = False
        for event in change.events:
            if float(event[1]) >= since:
                self.out.write(event_line(event) + "\n")
        if self.tty:
            self.out.write(progress_bar(change.status))
            self._bar = True
        self.out.flush()

    def close(self) -> None:
        """End the bar's line so what follows starts on its own."""
        if self._bar:
            self.out.write("\n")
            self.out.flush()
            self._bar = False


def follow_drain(ctx: Context, target: str, since: float) -> DrainStatus:
    """Follow `target` (`node/<name>` or `queue`) until its drain is no longer draining;
    events older than `since` (a previous drain's) are not shown.  Event-driven: each
    wait returns as soon as the drain has new events."""
    follower = Follower(ctx.stdout, tty=ctx.stdout.isatty())
    serial = 0
    try:
        while True:
            change = ctx.luxi.wait_for_drain_change(
                target=target, since_event=serial, timeout=WAIT_SECONDS
            )
            if isinstance(change, str):  # "nochange"
                continue
            follower.show(change, since=since)
            serial = max([serial, *(int(event[0]) for event in change.events)])
            if change.status.status not in ("scheduled", "draining"):  # it ended
                return change.status
    finally:
        follower.close()


def _stopped(ctx: Context, what: str, status_cmd: str, cancel_cmd: str) -> int:
    ctx.note(
        f"lw: stopped following; {what} goes on (see `{status_cmd}`, cancel with `{cancel_cmd}`)"
    )
    return EXIT_INTERRUPTED


def _outcome(ctx: Context, status: DrainStatus) -> int:
    """0 for a drain that completed; Failed (exit 1) saying how it ended otherwise."""
    name = status.target
    summary = progress_text(status)
    if status.status == "canceled":
        raise Failed(f"the drain of {name} was canceled ({summary})")
    if status.shut_down:
        raise Failed(
            f"the drain of {name} reached its deadline: {summary}; shut down: "
            + ", ".join(status.shut_down)
        )
    if status.target == "queue" and status.deadline_reached:
        raise Failed(f"the queue drain reached its deadline: {summary}; the rest was canceled")
    ctx.out(f"drain of {name} complete: {summary}")
    return EXIT_OK


def start_text(when: float) -> str:
    """A scheduled drain's start time as drain-status shows it: `2026-12-24 02:00` (local
    time, to the minute, as it was given to `--at`)."""
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(when))


def _deadline_text(status: DrainStatus) -> str:
    if status.deadline is None:
        return "no deadline"
    left = status.deadline - time.time()
    return f"deadline {format_value('start_ts', status.deadline)} (in {format_duration(left)})"


# -- lw node drain … ---------------------------------------------------------------------------


def node_drain(ctx: Context, args: argparse.Namespace) -> int:
    """lw node drain NODE [--deadline D | --no-deadline | --force] [--at TIME] [...] |
    --disable | --dry-run [--max-parallel N] (the plan; the other options do not change it).  With --at the drain is only recorded (scheduled, or started now when the
    time is past) and not followed: it may start hours later."""
    timing = args.deadline is not None or args.no_deadline or args.force
    if args.dry_run:
        if args.disable or args.keep_drained:
            raise UsageError("--dry-run shows what a drain would do; it does not go with --disable")
        return drain_plan.dry_run(ctx, args.name, args.max_parallel or 1)
    if args.disable:
        if timing or args.max_parallel is not None or args.priority is not None or args.at:
            raise UsageError("--disable takes only --keep-drained")
        status = ctx.luxi.cancel_node_drain(node=args.name, keep_drained=args.keep_drained)
        flag = "stays drained" if args.keep_drained else "is being undrained"
        ctx.out(f"drain of {args.name}: {status.status}; the node {flag}")
        return EXIT_OK
    if args.keep_drained:
        raise UsageError("--keep-drained goes with --disable")
    params: dict[str, Any] = {"node": args.name}
    if args.deadline is not None:
        params["deadline"] = args.deadline
    elif args.no_deadline:
        params["deadline"] = None
    elif args.force:
        params["deadline"] = 0
    for key in ("max_parallel", "priority", "message"):
        if getattr(args, key) is not None:
            params[key] = getattr(args, key)
    if args.at is not None:
        params["start_at"] = args.at
    status = ctx.luxi.drain_node(**params)
    if status.status == "scheduled":
        ctx.out(
            f"drain of {args.name} scheduled for {start_text(status.started_at)}: "
            f"{status.total} instances to move, {_deadline_text(status)} "
            f"(`lw node drain {args.name} --disable` cancels it)"
        )
        return EXIT_OK
    if args.at is not None:  # a start time already past: it started now; not followed
        ctx.out(
            f"start time already past: draining {args.name} now: {progress_text(status)}, "
            f"{_deadline_text(status)}"
        )
        return EXIT_OK
    if args.detach:
        ctx.out(f"draining {args.name}: {progress_text(status)}, {_deadline_text(status)}")
        return EXIT_OK
    ctx.note(f"draining {args.name}; Ctrl-C stops following, not the drain")
    try:
        final = follow_drain(ctx, status.target, since=status.started_at)
    except KeyboardInterrupt:
        return _stopped(
            ctx,
            f"the drain of {args.name}",
            f"lw node drain-status {args.name}",
            f"lw node drain {args.name} --disable",
        )
    return _outcome(ctx, final)


def _value(field: str, status: DrainStatus) -> Any:
    if field == "progress":
        return progress_text(status)
    if field == "blocked":
        return [f"{what}: {why}" for what, why in status.blocked]
    return getattr(status, field)


def _cell(field: str, value: Any) -> Any:
    """A table cell: times in local time (a start time to the minute, as `--at` takes it)."""
    if value is None or field not in _TIMES:
        return value
    return start_text(value) if field == "start_at" else format_value("start_ts", value)


def drain_status(ctx: Context, args: argparse.Namespace) -> int:
    """lw node drain-status [NODE]"""
    drains = ctx.luxi.query_drains()
    if args.name is not None:
        target = f"node/{args.name}"
        drains = [d for d in drains if d.target == target]
        if not drains:
            raise Failed(f"{args.name} has no drain (start one with `lw node drain {args.name}`)")
    fields = DRAIN_FIELDS.choose(args.output, record=args.name is not None)
    if args.json:
        chosen = [{f: _value(f, d) for f in fields} for d in drains]
        ctx.out(to_json(chosen[0] if args.name is not None else chosen))
        return EXIT_OK
    rows = [[_cell(f, _value(f, d)) for f in fields] for d in drains]
    if args.name is not None:
        print_record(ctx, args, fields, rows[0])
    else:
        print_table(ctx, args, fields, rows)
    return EXIT_OK


# -- lw queue drain|undrain --------------------------------------------------------------------


def queue_drain(ctx: Context, args: argparse.Namespace) -> int:
    """lw queue drain [--soft] [--deadline D] [--message TEXT] [--wait]"""
    if not (args.soft or args.deadline is not None):
        given = [
            option
            for option, used in (("--message", args.message is not None), ("--wait", args.wait))
            if used
        ]
        if given:
            raise UsageError(
                f"{' and '.join(given)} {'need' if len(given) > 1 else 'needs'} --soft or "
                "--deadline (a queue drain); "
                "without them `lw queue drain` sets the drain flag, which has no message "
                "and nothing to wait for"
            )
        return queue.queue_drain(ctx, args)
    mode: Literal["hard", "soft"] = "soft" if args.soft else "hard"
    status = ctx.luxi.drain_queue(mode=mode, deadline=args.deadline, message=args.message or "")
    verb = "held" if args.soft else "refused"
    ctx.out(
        f"queue drain ({mode}): new jobs are {verb}; {progress_text(status)}, "
        f"{_deadline_text(status)} (`lw queue undrain` ends it)"
    )
    if not args.wait:
        return EXIT_OK
    try:
        final = follow_drain(ctx, "queue", since=status.started_at)
    except KeyboardInterrupt:
        return _stopped(ctx, "the queue drain", "lw node drain-status", "lw queue undrain")
    return _outcome(ctx, final)


def queue_undrain(ctx: Context, args: argparse.Namespace) -> int:
    """lw queue undrain: clear the drain flag and end the queue drain, if any."""
    # A luxid that predates drains has no queue drain, only the flag.
    with contextlib.suppress(errors.MethodNotFound):
        ctx.luxi.undrain_queue()
    return queue.queue_undrain(ctx, args)
