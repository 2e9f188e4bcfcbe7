"""`lw`, Lockwarden's command line (docs/contracts.md#lw-command-line), with Ganeti's
`gnt-*` habits.

This module only builds the argument parser and dispatches: each leaf command names its
handler as ``"module:function"`` inside `client.cli`, imported when that command runs, so
``lw --help`` and ``lw job list`` load nothing they do not use.  Handlers take
``(ctx, args)`` and return the exit code; failures are exceptions that `main` maps to the
exit codes:

- 0 done; 1 the operation or job failed (or was rejected); 2 usage error;
  3 a daemon could not be reached.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any

from client import __version__
from client.argparser import StrictParser
from client.cli.admin_parsers import (
    audit_command,
    backup_command,
    budget_commands,
    cluster_commands,
    events_command,
    lock_commands,
    store_commands,
    user_commands,
)
from client.cli.argtypes import (
    duration,
    non_negative_int,
    positive_int,
    priority,
    seconds,
    size_mib,
    start_time,
    yes_no,
)
from client.cli.global_options import dir_options, first_word
from client.etcd_security import SecurityError, add_security_options, security_from_args
from client.vocabulary import DEFAULT_PRIORITY, PRIORITY_HINT

_EPILOG = """\
exit codes: 0 done, 1 the operation or job failed (or was rejected), 2 usage error,
3 a daemon could not be reached.

Start a development stack with `lw up --demo`; see `lw COMMAND --help` for each command."""


def _parent(fill: Any) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(add_help=False)
    fill(parser)
    return parser


def _table_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("output")
    group.add_argument(
        "-o",
        "--output",
        metavar="FIELD,...",
        help="fields to show, comma-separated; '+a,b' adds to the default fields",
    )
    group.add_argument("--no-headers", action="store_true", help="omit the header line")
    group.add_argument(
        "--separator", metavar="SEP", help="separate columns with SEP instead of aligning them"
    )
    group.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _job_options(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("job")
    group.add_argument(
        "--submit",
        action="store_true",
        help="print the job id and return instead of waiting for the job",
    )
    group.add_argument(
        "--reason",
        metavar="TEXT",
        help="why (kept in the job's reason trail; 'rate-limit:N:LABEL' runs at most N such "
        "jobs at once)",
    )
    group.add_argument(
        "--priority",
        type=priority,
        metavar="P",
        help=f"job priority, {PRIORITY_HINT}; default {DEFAULT_PRIORITY}",
    )


class _Builder:
    """Adds commands with the shared option groups and a lazily imported handler."""

    def __init__(self) -> None:
        self.common = _parent(lambda p: dir_options(p, top=False))
        self.table = _parent(_table_options)
        self.job = _parent(_job_options)

    def group(self, sub: Any, name: str, help: str) -> Any:
        parser = sub.add_parser(name, help=help, description=help, parents=[self.common])
        return parser.add_subparsers(dest="action", metavar="COMMAND", required=True)

    def leaf(
        self,
        sub: Any,
        name: str,
        handler: str,
        help: str,
        *parents: argparse.ArgumentParser,
        description: str | None = None,
    ) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = sub.add_parser(
            name,
            help=help,
            description=description or help,
            parents=[self.common, *parents],
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        parser.set_defaults(handler=handler)
        return parser


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The `lw` command tree.

    With `argv`, only the command group it names (if any) gets its subcommands; the others
    are listed but left empty, since building them all costs more than the rest of `lw`'s
    own start-up.  Without `argv` the whole tree is built.
    """
    parser = StrictParser(
        prog="lw",
        description="Lockwarden's command line: the cluster, its job queue, filters and locks.",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    dir_options(parser, top=True)
    add_security_options(parser)
    b = _Builder()
    top = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _stack_commands(b, top)
    wanted = first_word(argv, GROUPS) if argv is not None else None
    for name, (help, fill) in GROUPS.items():
        sub = b.group(top, name, help)
        if argv is None or wanted == name:
            fill(b, sub)
    return parser


def _stack_commands(b: _Builder, top: Any) -> None:
    up = b.leaf(
        top,
        "up",
        "up:up",
        "start wconfd, luxid and rapi in the foreground (development stack)",
        description="Start lw-wconfd, lw-luxid and lw-rapi as children on the run and state "
        "dirs, wait until each answers, and stop them all on Ctrl-C or SIGTERM (or when one "
        "of them dies).",
    )
    up.add_argument(
        "--demo",
        action="store_true",
        help="fill an empty cluster with three nodes and let anyone read the RAPI",
    )
    up.add_argument("--rapi-bind", default="127.0.0.1", metavar="ADDR", help="RAPI address")
    up.add_argument(
        "--rapi-port", type=non_negative_int, default=5080, metavar="PORT", help="RAPI port"
    )
    up.add_argument("--rapi-insecure-http", action="store_true",
                    help="plain HTTP off loopback (see docs/operations.md for HTTPS)")  # fmt: skip
    up.add_argument("--no-rapi", action="store_true", help="do not start lw-rapi")
    events_command(b, top)
    audit_command(b, top)
    backup_command(b, top)
    up.add_argument(
        "--ha",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="start a local three-member etcd and N control-plane nodes node1..N on it "
        "(no RAPI; see docs/operations.md)",
    )
    up.add_argument(
        "--tls",
        action="store_true",
        help="with --ha: etcd over TLS with client certificates and etcd's auth on; the "
        "certificates and passwords are made under <state dir>/tls/ "
        "(docs/operations.md#etcd-over-tls)",
    )
    up.add_argument(
        "--log-level",
        default="INFO",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="the daemons' log level (default INFO)",
    )
    b.leaf(top, "info", "cluster:info", "cluster and queue summary", b.table)


def _node_commands(b: _Builder, sub: Any) -> None:
    b.leaf(sub, "list", "cluster:node_list", "list the nodes", b.table)
    b.leaf(sub, "info", "cluster:node_info", "show one node", b.table).add_argument("name")
    add = b.leaf(sub, "add", "cluster:node_add", "add a node (an OP_NODE_ADD job)", b.job)
    add.add_argument("name")
    add.add_argument("-g", "--group", help="node group (default: default)")
    add.add_argument("--primary-ip", metavar="IP", help="the node's primary IP address")
    _capacity_options(add, "(default 64G)", "(default 32)")
    b.leaf(
        sub, "remove", "cluster:node_remove", "remove a node (an OP_NODE_REMOVE job)", b.job
    ).add_argument("name")
    mod = b.leaf(
        sub, "modify", "cluster:node_modify", "change a node (an OP_NODE_SET_PARAMS job)", b.job
    )
    mod.add_argument("name")
    mod.add_argument("-O", "--offline", type=yes_no, metavar="yes|no", help="mark offline")
    mod.add_argument("-D", "--drained", type=yes_no, metavar="yes|no", help="mark drained")
    mod.add_argument(
        "-C", "--master-candidate", type=yes_no, metavar="yes|no", help="master candidate"
    )
    _capacity_options(mod, "", "")
    _drain_commands(b, sub)


def _capacity_options(parser: Any, memory_default: str, cpus_default: str) -> None:
    """--memory and --cpus: a node's capacity for instances (docs/capacity.md#the-model)."""
    parser.add_argument(
        "--memory", type=size_mib, metavar="SIZE",
        help=f"memory for instances (MiB, or 64G) {memory_default}".rstrip(),
    )  # fmt: skip
    parser.add_argument(
        "--cpus", type=positive_int, metavar="N",
        help=f"physical CPUs {cpus_default}".rstrip(),
    )  # fmt: skip


def _drain_commands(b: _Builder, sub: Any) -> None:
    drain = b.leaf(
        sub,
        "drain",
        "drains:node_drain",
        "move a node's instances away before a deadline, and follow it",
        description="Mark NODE drained, migrate its instances away (--max-parallel at once); at "
        "the deadline fail over the rest, shut down what no node takes. Follows it (Ctrl-C "
        "stops following only); exit 1 if instances were shut down or it was canceled.",
    )
    drain.add_argument("name", metavar="NODE")
    when = drain.add_mutually_exclusive_group()
    when.add_argument(
        "--deadline", type=duration, metavar="DURATION", help="e.g. 90s, 15m, 1h30m (default 1h)"
    )
    when.add_argument("--no-deadline", action="store_true", help="migrate for as long as it takes")
    when.add_argument("--force", action="store_true", help="deadline now: fail over at once")
    drain.add_argument(
        "--max-parallel", type=positive_int, metavar="N", help="moves at once (default 1)"
    )
    drain.add_argument(
        "--priority", type=priority, metavar="P", help="the moves' job priority (default 0)"
    )
    drain.add_argument("--message", metavar="TEXT", help="why (shown with the drain)")
    drain.add_argument(
        "--at",
        type=start_time,
        metavar="TIME",
        help="start then, not now (ISO 8601, e.g. 2026-12-24T02:00; local time unless it has "
        "an offset); the deadline counts from then; returns once it is scheduled",
    )
    drain.add_argument("--detach", action="store_true", help="start it and return")
    drain.add_argument(
        "--dry-run",
        action="store_true",
        help="change nothing: show each instance's target (or why it is blocked) and the "
        "waves; exit 1 if any is blocked",
    )
    drain.add_argument("--disable", action="store_true", help="cancel the drain")
    drain.add_argument("--keep-drained", action="store_true", help="with --disable: stay drained")
    b.leaf(
        sub, "drain-status", "drains:drain_status", "the drains and how far they got", b.table
    ).add_argument("name", metavar="NODE", nargs="?")


def _instance_commands(b: _Builder, sub: Any) -> None:
    b.leaf(sub, "list", "cluster:instance_list", "list the instances", b.table)
    b.leaf(sub, "info", "cluster:instance_info", "show one instance", b.table).add_argument("name")
    add = b.leaf(
        sub, "add", "cluster:instance_add", "create an instance (an OP_INSTANCE_CREATE job)", b.job
    )
    add.add_argument("name")
    add.add_argument(
        "--memory", type=size_mib, default=512, metavar="SIZE", help="memory (MiB, or 2G)"
    )
    add.add_argument("--vcpus", type=positive_int, default=1, metavar="N", help="virtual CPUs")
    add.add_argument(
        "--disk",
        action="append",
        type=size_mib,
        default=[],
        metavar="SIZE",
        help="a disk of SIZE (MiB, or 10G); repeat for more disks",
    )
    add.add_argument(
        "-n",
        "--node",
        metavar="NODE",
        help="primary node (default: the one with the most free memory)",
    )
    add.add_argument("--nics", type=non_negative_int, default=1, metavar="N", help="NICs")
    b.leaf(
        sub, "remove", "cluster:instance_remove", "remove an instance (OP_INSTANCE_REMOVE)", b.job
    ).add_argument("name")
    mig = b.leaf(
        sub,
        "migrate",
        "cluster:instance_migrate",
        "move an instance to another node (OP_INSTANCE_MIGRATE)",
        b.job,
    )
    mig.add_argument("name")
    mig.add_argument("-n", "--target-node", metavar="NODE", help="where to (default: chosen)")


def _job_commands(b: _Builder, sub: Any) -> None:
    b.leaf(sub, "list", "jobs:job_list", "list the jobs that are not archived", b.table)
    b.leaf(sub, "info", "jobs:job_info", "show one job", b.table).add_argument("id", type=int)
    b.leaf(
        sub, "watch", "jobs:job_watch", "follow a job's log until it ends; exit 1 if it failed"
    ).add_argument("id", type=int)
    b.leaf(
        sub,
        "why",
        "jobs:job_why",
        "why a job is not running: what holds it, then what holds that, one link a line",
        description="Print the chain from the job to what holds it (a filter rule, a rate\n"
        "limit, the slots, a job it depends on, a lock and its holder), one link a line,\n"
        "each indented two spaces more than the one it hangs from.  Nothing is printed\n"
        "for a job that runs unhindered or has ended.  See docs/operations.md.",
    ).add_argument("id", type=int, help="the job's id")
    cancel = b.leaf(sub, "cancel", "jobs:job_cancel", "cancel a job")
    cancel.add_argument("id", type=int)
    cancel.add_argument(
        "--kill", action="store_true", help="SIGKILL a running job instead of a clean stop"
    )
    b.leaf(sub, "archive", "jobs:job_archive", "archive a finished job").add_argument(
        "id", type=int
    )
    prio = b.leaf(sub, "priority", "jobs:job_priority", "change a queued or running job's priority")
    prio.add_argument("id", type=int)
    prio.add_argument("priority", type=priority, help=PRIORITY_HINT)
    submit = b.leaf(
        sub,
        "submit",
        "jobs:job_submit",
        "submit a job from a JSON file of opcodes and wait for it",
        b.job,
        description='Submit a job read from FILE ("-" for stdin): a JSON list of opcodes, '
        'e.g. [{"OP_ID": "OP_TEST_DELAY", "duration": 1}], or one opcode object.',
    )
    submit.add_argument("file", metavar="FILE.json")


def _filter_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--priority",
        type=non_negative_int,
        metavar="N",
        help="rule priority, >= 0; lower is consulted first (add: default 0)",
    )
    parser.add_argument(
        "--predicates",
        metavar="JSON",
        help='JSON list of predicates, e.g. \'[["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]]\' '
        "(add: default [], matches every job)",
    )
    parser.add_argument(
        "--action",
        metavar="ACTION",
        help='ACCEPT, PAUSE, REJECT, CONTINUE or "RATE_LIMIT n" (add: default CONTINUE)',
    )
    parser.add_argument("--reason", metavar="TEXT", help="why (kept in the reason trail)")


def _filter_commands(b: _Builder, sub: Any) -> None:
    b.leaf(sub, "list", "filters:filter_list", "list the filter rules", b.table)
    b.leaf(sub, "info", "filters:filter_info", "show one filter rule", b.table).add_argument("uuid")
    add = b.leaf(sub, "add", "filters:filter_add", "add a filter rule; prints its uuid")
    _filter_options(add)
    rep = b.leaf(
        sub,
        "replace",
        "filters:filter_replace",
        "replace a filter rule (options not given keep their values)",
    )
    rep.add_argument("uuid")
    _filter_options(rep)
    b.leaf(sub, "delete", "filters:filter_delete", "delete a filter rule").add_argument("uuid")


def _queue_commands(b: _Builder, sub: Any) -> None:
    b.leaf(sub, "info", "queue:queue_info", "drain flag, running jobs, jobs per status", b.table)
    drain = b.leaf(
        sub,
        "drain",
        "drains:queue_drain",
        "refuse new jobs (running and queued jobs go on)",
        description="Without --soft and --deadline: set the drain flag (new jobs are "
        "refused). With --soft or --deadline: a queue drain, in which accepted jobs finish, "
        "new ones are refused (held with --soft), and at the deadline what is left is "
        "canceled. --message and --wait need --soft or --deadline.",
    )
    drain.add_argument("--soft", action="store_true", help="hold new jobs instead of refusing")
    drain.add_argument(
        "--deadline", type=duration, metavar="DURATION", help="cancel what is left after it"
    )
    drain.add_argument(
        "--message",
        metavar="TEXT",
        help="why (in the filter rule's reason; needs --soft or --deadline)",
    )
    drain.add_argument(
        "--wait",
        action="store_true",
        help="follow the drain until it ends (needs --soft or --deadline)",
    )
    b.leaf(sub, "undrain", "drains:queue_undrain", "accept new jobs again (ends a queue drain)")


def _debug_commands(b: _Builder, sub: Any) -> None:
    delay = b.leaf(
        sub, "delay", "debug:delay", "run an OP_TEST_DELAY job (holds node locks)", b.job
    )
    delay.add_argument("seconds", type=seconds)
    delay.add_argument(
        "--on-node",
        action="append",
        default=[],
        metavar="NODE",
        help="hold node/NODE exclusively while waiting (repeatable; need not exist)",
    )
    delay.add_argument("--repeat", type=non_negative_int, default=0, help="wait N times")
    delay.add_argument("--fail", action="store_true", help="fail after waiting")
    delay.add_argument(
        "--log-message", action="append", default=[], metavar="TEXT", help="log TEXT first"
    )


GROUPS: dict[str, tuple[str, Callable[[_Builder, Any], None]]] = {
    "node": ("list, inspect, add, remove and modify nodes", _node_commands),
    "instance": ("list, inspect, add, remove and migrate instances", _instance_commands),
    "job": ("list, inspect, follow, explain, cancel and submit jobs", _job_commands),
    "filter": ("manage the job filter rules", _filter_commands),
    "budget": ("disruption budgets: how many instances may be down at once", budget_commands),
    "queue": ("the job queue: summary and drain flag", _queue_commands),
    "lock": ("wconfd's locks", lock_commands),
    "cluster": (
        "the control-plane nodes: roles and failover (see docs/operations.md)",
        cluster_commands,
    ),
    "store": (
        "move the control-plane state between stores (see docs/operations.md)",
        store_commands,
    ),
    "debug": ("debugging aids", _debug_commands),
    "rapi-user": ("RAPI users, their roles and tokens (in lw-rapi's state dir)", user_commands),
}


def main(argv: Sequence[str] | None = None) -> int:
    """Run one `lw` command; the exit code (see the module docstring)."""
    if argv is None:
        argv = sys.argv[1:]
    args = build_parser(argv).parse_args(argv)
    try:  # for the commands that reach an etcd store themselves
        args.etcd_security = security_from_args(args)
    except SecurityError as exc:
        print(f"lw: {exc}", file=sys.stderr)
        return 1
    module, _, func = str(args.handler).partition(":")
    handler = getattr(importlib.import_module(f"client.cli.{module}"), func)
    from client.cli.context import run

    return run(handler, args)


if __name__ == "__main__":
    sys.exit(main())
