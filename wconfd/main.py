"""`lw-wconfd`: the configuration and lock daemon's entry point."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from client._server.audit import AuditSettings
from client._server.roles import SingleNode
from client._server.runner import daemon_parser, parse_daemon_args, run_daemon, serve_until_stopped
from client._server.server import RpcServer
from client.paths import LUXID_SOCKET, WCONFD_SOCKET
from wconfd.service import WConfd

if TYPE_CHECKING:
    from wconfd.ha import HaShell


def main(argv: list[str] | None = None) -> int:
    """Parse the options and run wconfd until SIGTERM."""
    parser = daemon_parser(
        "lw-wconfd", "Lockwarden's configuration and lock daemon (JSON-RPC on a Unix socket)."
    )
    args = parse_daemon_args(parser, argv)

    async def serve(socket_path: Path, state_dir: Path) -> None:
        shell: HaShell | None = None
        if args.store is None:
            service = WConfd(
                state_dir,
                sweep_interval=args.sweep_interval,
                role=SingleNode(args.node),
                event_retention=args.event_retention,
                audit=AuditSettings.from_args(args),
            )
        else:
            from wconfd.ha import HaShell  # the etcd client only where it is used (start-up time)

            shell = HaShell(
                args.store, args.node, args.lease_ttl, args.sweep_interval,
                luxid_socket=socket_path.with_name(LUXID_SOCKET),
                event_retention=args.event_retention, state_dir=state_dir,
                audit=AuditSettings.from_args(args),
            )  # fmt: skip
            service = shell.service
        server = RpcServer(
            socket_path,
            service.methods,
            max_message_bytes=args.max_message_bytes,
            group=args.group,
            on_disconnect=service.disconnected,
        )
        service.start()
        try:
            if shell is not None:
                await shell.start(settle=2 * args.lease_ttl + 2)
            await serve_until_stopped(server, "wconfd")
        finally:
            if shell is not None:
                await shell.stop()
            service.close()

    return run_daemon("wconfd", WCONFD_SOCKET, args, serve)
