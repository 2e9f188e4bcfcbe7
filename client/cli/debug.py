"""`lw debug delay`: an OP_TEST_DELAY job, to exercise the queue, locks and cancel."""

from __future__ import annotations

import argparse

from client.cli.context import Context
from client.cli.jobs import opcode, submit_and_wait


def delay(ctx: Context, args: argparse.Namespace) -> int:
    """lw debug delay SECONDS [--on-node N]…"""
    op = opcode(
        "OP_TEST_DELAY",
        args,
        duration=args.seconds,
        on_nodes=args.on_node,
        repeat=args.repeat,
        fail=args.fail or None,
        log_messages=args.log_message or None,
    )
    return submit_and_wait(ctx, args, [op])
