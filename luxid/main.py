"""`lw-luxid`: the job-queue daemon's entry point."""

from __future__ import annotations

from pathlib import Path

from client.api.luxi import LuxiApi
from client.daemon.dispatch import build_methods
from client.daemon.runner import daemon_parser, run_daemon, serve_until_stopped
from client.daemon.server import RpcServer
from client.paths import LUXID_SOCKET
from luxid.service import LuxidService


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run luxid until SIGTERM."""
    parser = daemon_parser("lw-luxid", "Lockwarden's job-queue daemon (JSON-RPC on a Unix socket).")
    args = parser.parse_args(argv)

    async def serve(socket_path: Path, state_dir: Path) -> None:
        service = LuxidService()
        server = RpcServer(
            socket_path,
            build_methods(LuxiApi, service),
            max_message_bytes=args.max_message_bytes,
            group=args.group,
        )
        await serve_until_stopped(server, "luxid")

    return run_daemon("luxid", LUXID_SOCKET, args, serve)
