"""`lw-luxid`: the job-queue daemon's entry point."""

from __future__ import annotations

import os
from pathlib import Path

from client import paths
from client.api.luxi import LuxiApi
from client.daemon import sdnotify
from client.daemon.dispatch import build_methods
from client.daemon.runner import StartupError, daemon_parser, run_daemon, serve_until_stopped
from client.daemon.server import RpcServer
from client.errors import StorageError
from client.metrics import instrument
from client.paths import LUXID_SOCKET
from luxid.processes import ExecSpawner, JobProcesses, Spawner, ZygoteSpawner
from luxid.queue import Queue
from luxid.service import LuxidService
from luxid.shutdown import finish_tasks
from luxid.store import open_store
from luxid.wconfd_link import WconfdLink

# The stop budget: each step of luxid's way out waits at most this long (SPEC §10).
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
    args = parser.parse_args(argv)
    run_dir = paths.run_dir(args.run_dir)

    async def serve(socket_path: Path, state_dir: Path) -> None:
        env = job_environment(run_dir, state_dir)

        def spawner(procs: JobProcesses) -> Spawner:
            if args.job_spawn == "exec":
                return ExecSpawner(env)
            return ZygoteSpawner(env, procs.watch_child)

        try:
            store = open_store(state_dir)
        except StorageError as exc:
            raise StartupError(exc.message) from exc
        queue = Queue(store, spawner, args.sweep_interval)
        config = WconfdLink(paths.wconfd_socket(run_dir), queue.config_changed)
        service = LuxidService(queue, config)
        server = RpcServer(
            socket_path,
            instrument(build_methods(LuxiApi, service), service.metrics),
            max_message_bytes=args.max_message_bytes,
            group=args.group,
        )
        await queue.open()
        config.start()
        service.drains.start()
        try:
            await serve_until_stopped(server, "luxid")
        finally:
            await service.drains.close()
            await config.close(STOP_STEP_TIMEOUT)
            await queue.close(STOP_STEP_TIMEOUT)
            if not await finish_tasks(STOP_STEP_TIMEOUT):
                os._exit(1)  # asyncio.run would wait for them for good (logged above)

    return run_daemon("luxid", LUXID_SOCKET, args, serve)
