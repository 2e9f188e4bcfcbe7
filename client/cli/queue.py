"""`lw queue …`: the queue at a glance and its drain flag."""

from __future__ import annotations

import argparse

from client.cli.context import EXIT_OK, Context
from client.cli.output import Fields, print_record

QUEUE_FIELDS = Fields(
    known=("drained", "max_running_jobs", "running", "filters", "jobs"), default=()
)


def queue_info(ctx: Context, args: argparse.Namespace) -> int:
    """lw queue info"""
    info = ctx.luxi.query_queue_info()
    values = {
        "drained": info.drained,
        "max_running_jobs": info.max_running_jobs,
        "running": info.running,
        "filters": info.filters,
        "jobs": dict(sorted(info.counts.items())),
    }
    fields = QUEUE_FIELDS.choose(args.output, record=True)
    print_record(ctx, args, fields, [values[f] for f in fields])
    return EXIT_OK


def queue_drain(ctx: Context, args: argparse.Namespace) -> int:
    """lw queue drain"""
    ctx.luxi.set_drain_flag(flag=True)
    ctx.out(
        "queue drained: new jobs are refused; queued and running jobs go on "
        "(`lw queue undrain` accepts new jobs again)"
    )
    return EXIT_OK


def queue_undrain(ctx: Context, args: argparse.Namespace) -> int:
    """lw queue undrain"""
    ctx.luxi.set_drain_flag(flag=False)
    ctx.out("queue undrained: new jobs are accepted")
    return EXIT_OK
