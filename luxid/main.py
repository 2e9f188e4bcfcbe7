"""`lw-luxid`: the job-queue daemon's entry point."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path

from client import paths
from client._server import sdnotify
from client._server.audit import AuditSettings
from client._server.etcd.errors import AccessRefused
from client._server.roles import Role, SingleNode
from client._server.runner import (
    StartupError,
    daemon_parser,
    parse_daemon_args,
    run_daemon,
    serve_until_stopped,
)
from client._server.server import RpcServer
from client.errors import StorageError
from client.paths import LUXID_SOCKET
from luxid.drains.record import DRAIN_KILL_GRACE
from luxid.ha import HaLuxid
from luxid.processes import ExecSpawner, JobProcesses, Spawner, ZygoteSpawner
from luxid.shutdown import finish_tasks
from luxid.storage import JobStore, open_store
from luxid.term import LuxidTerm

# The stop budget: each step of luxid's way out waits at most this long
# (docs/contracts.md#reliability-and-security).
STOP_STEP_TIMEOUT = 2.0


def job_environment(run_dir: Path, state_dir: Path) -> dict[str, str]:
    """What job processes inherit: luxid's environment without systemd's notify socket,
    plus the directories, so they find both daemons."""
    env = sdnotify.child_environment()
    env["LW_RUN_DIR"] = str(run_dir)
    env["LW_STATE_DIR"] = str(state_dir)
    return env


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run luxid until SIGTERM."""
    parser = daemon_parser("lw-luxid", "Lockwarden's job-queue daemon (JSON-RPC on a Unix socket).")
    parser.add_argument(
        "--job-spawn",
        choices=["zygote", "exec"],
        default=os.environ.get("LW_JOB_SPAWN", "zygote"),
        help="how job processes start: forked from a warm zygote (default) or a fresh "
        "`python -m jobproc <id>` each",
    )
    parser.add_argument(
        "--drain-kill-after",
        type=float,
        default=DRAIN_KILL_GRACE,
        metavar="SECONDS",
        help="a queue drain's deadline cancels the jobs accepted before it; those still "
        f"running this long after it are killed (default {DRAIN_KILL_GRACE:g})",
    )
    args = parse_daemon_args(parser, argv)
    if not args.drain_kill_after >= 0:
        parser.error("--drain-kill-after must be >= 0 seconds")
    run_dir = paths.run_dir(args.run_dir)

    async def serve(socket_path: Path, state_dir: Path) -> None:
        env = job_environment(run_dir, state_dir)

        def spawner(procs: JobProcesses) -> Spawner:
            if args.job_spawn == "exec":
                return ExecSpawner(env)
            return ZygoteSpawner(env, procs.watch_child)

        async def make_term(store: JobStore, role: Role) -> LuxidTerm:
            return await LuxidTerm.start(
                store, spawner, args.sweep_interval, paths.wconfd_socket(run_dir),
                role=role, drain_kill_after=args.drain_kill_after,
                event_retention=args.event_retention, backup_dir=state_dir,
                audit=AuditSettings.from_args(args),
            )  # fmt: skip

        server = RpcServer(
            socket_path, {}, max_message_bytes=args.max_message_bytes, group=args.group
        )
        if args.store is not None:  # etcd: serve while this node is master
            ha = HaLuxid(
                args.store, args.node, args.lease_ttl, server, make_term,
                wconfd_socket=paths.wconfd_socket(run_dir), stop_timeout=STOP_STEP_TIMEOUT,
            )  # fmt: skip
            try:  # before the socket opens: a refusal ends luxid with its message
                await ha.client.check_access(args.store.prefix)
            except AccessRefused:
                await ha.client.close()
                raise
            ha.start()
            stop: Callable[[], Awaitable[None]] = ha.close
        else:
            try:
                store = open_store(state_dir)
            except StorageError as exc:
                raise StartupError(exc.message) from exc
            term = await make_term(store, SingleNode(args.node))
            server.methods = term.methods()
            stop = partial(term.close, STOP_STEP_TIMEOUT)
        try:
            await serve_until_stopped(server, "luxid")
        finally:
            await stop()
            if not await finish_tasks(STOP_STEP_TIMEOUT):
                os._exit(1)  # asyncio.run would wait for them for good (logged above)

    return run_daemon("luxid", LUXID_SOCKET, args, serve)
