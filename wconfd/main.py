"""`lw-wconfd`: the configuration and lock daemon's entry point."""

from __future__ import annotations

from pathlib import Path

from client.api.wconfd import WConfdApi
from client.daemon.dispatch import build_methods
from client.daemon.runner import daemon_parser, run_daemon, serve_until_stopped
from client.daemon.server import RpcServer
from client.metrics import instrument
from client.paths import WCONFD_SOCKET
from wconfd.service import WConfd


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run wconfd until SIGTERM."""
    parser = daemon_parser(
        "lw-wconfd", "Lockwarden's configuration and lock daemon (JSON-RPC on a Unix socket)."
    )
    args = parser.parse_args(argv)

    async def serve(socket_path: Path, state_dir: Path) -> None:
        service = WConfd(state_dir, sweep_interval=args.sweep_interval)
        server = RpcServer(
            socket_path,
            instrument(
                build_methods(WConfdApi, *service.implementations(), guard=service.guard),
                service.metrics,
            ),
            max_message_bytes=args.max_message_bytes,
            group=args.group,
            on_disconnect=service.disconnected,
        )
        service.start()
        try:
            await serve_until_stopped(server, "wconfd")
        finally:
            service.close()

    return run_daemon("wconfd", WCONFD_SOCKET, args, serve)
