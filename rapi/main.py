"""`lw-rapi`: the HTTP remote API daemon (docs/contracts.md#rapi-paths), a client of luxid
and wconfd."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import ssl
from pathlib import Path

from aiohttp import web

from client import AsyncLuxiClient, AsyncWConfdClient, paths, rapi_endpoint
from client._server import sdnotify
from client._server.runner import (
    add_log_level,
    catch_stop_signals,
    install_event_loop_policy,
    new_parser,
    setup_logging,
    wait_for_stop_signal,
)
from rapi import observe
from rapi.app import make_app
from rapi.auth import Authorizer
from rapi.credentials import Credentials
from rapi.routing import Backend, Settings

log = logging.getLogger("rapi")
RPC_PATIENCE = 10.0  # seconds a request waits for a restarting daemon


def build_parser() -> argparse.ArgumentParser:
    """lw-rapi's options; --run-dir/--state-dir win over LW_RUN_DIR/LW_STATE_DIR."""
    parser = new_parser(
        "lw-rapi",
        "Lockwarden's HTTP remote API (Ganeti RAPI version 2), a client of wconfd and luxid.",
    )
    parser.add_argument(
        "--state-dir",
        type=Path,
        metavar="DIR",
        help="where rapi_users and rapi_tokens live (default: $LW_STATE_DIR, "
        "/var/lib/lockwarden for root; the systemd unit: /var/lib/lockwarden-rapi)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        metavar="DIR",
        help="the daemons' sockets (default: $LW_RUN_DIR, /run/lockwarden for root)",
    )
    parser.add_argument(
        "--bind",
        default="127.0.0.1",
        metavar="ADDR",
        help="address to listen on (default 127.0.0.1)",
    )
    parser.add_argument("--port", type=int, default=5080, help="TCP port (default 5080)")
    parser.add_argument(
        "--ssl-cert", type=Path, metavar="FILE", help="serve HTTPS with this certificate (PEM)"
    )
    parser.add_argument(
        "--ssl-key", type=Path, metavar="FILE", help="the certificate's private key (PEM)"
    )
    parser.add_argument(
        "--insecure-http",
        action="store_true",
        help="serve plain HTTP on an address that is not loopback (passwords and tokens "
        "cross the network readable; without it such a --bind needs --ssl-cert/--ssl-key)",
    )
    parser.add_argument(
        "--allow-anonymous-read",
        action="store_true",
        help="let clients without credentials read (writes always need a user with write)",
    )
    observe.add_flags(parser)
    add_log_level(parser, "; INFO logs every request")
    return parser


def ssl_context(cert: Path, key: Path) -> ssl.SSLContext:
    """A server TLS context for the certificate and key (OSError/SSLError if unusable)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context


def is_loopback(address: str) -> bool:
    """Whether `address` is loopback: 127.0.0.0/8, ::1 or `localhost`."""
    if address.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(address.strip("[]")).is_loopback
    except ValueError:
        return False  # a host name: it may resolve to anything


def plain_http_refusal(bind: str, tls: bool, insecure_http: bool) -> str | None:
    """Why lw-rapi must not start serving plain HTTP on `bind`, or None."""
    if tls or insecure_http or is_loopback(bind):
        return None
    return (
        f"--bind {bind} is not a loopback address: serve HTTPS with --ssl-cert/--ssl-key, or "
        "pass --insecure-http to serve plain HTTP there anyway (passwords and tokens would "
        "cross the network readable; docs/operations.md#rapi-over-https)"
    )


async def serve(args: argparse.Namespace, tls: ssl.SSLContext | None) -> int:
    """Listen until SIGTERM/SIGINT; 1 if the address cannot be bound."""
    catch_stop_signals()
    run = paths.run_dir(args.run_dir)
    state = paths.state_dir(args.state_dir)
    backend = Backend(
        # An HTTP request waits out a daemon restart briefly, never the stubs' default
        # minutes: a client would rather have a 502 and retry.
        luxi=AsyncLuxiClient(run / paths.LUXID_SOCKET, patience=RPC_PATIENCE),
        wconfd=AsyncWConfdClient(run / paths.WCONFD_SOCKET, name="lw-rapi", patience=RPC_PATIENCE),
    )
    credentials = Credentials(state)
    credentials.load()  # read (and report problems) at start-up
    authorizer = Authorizer(credentials, allow_anonymous_read=args.allow_anonymous_read)
    insecure = args.insecure_http and tls is None
    app = make_app(backend, authorizer, Settings(state, insecure_http=insecure))
    observe.install(app, authorizer, metrics_anonymous=args.metrics_anonymous)
    runner = web.AppRunner(app, access_log=logging.getLogger("rapi.access"))
    await runner.setup()
    site = web.TCPSite(runner, args.bind, args.port, ssl_context=tls, reuse_address=True)
    try:
        await site.start()
    except OSError as exc:
        log.error("cannot listen on %s port %d: %s", args.bind, args.port, exc.strerror or exc)
        await runner.cleanup()
        return 1
    scheme = "https" if tls else "http"
    host = f"[{args.bind}]" if ":" in args.bind else args.bind
    where = f"{scheme}://{host}:{args.port}/"
    log.info("lw-rapi listening on %s (luxid and wconfd in %s; users in %s)", where, run, state)
    if insecure:
        log.warning(
            "--insecure-http: serving plain HTTP on %s; passwords and tokens cross the network "
            "readable (use --ssl-cert/--ssl-key)",
            where,
        )
    owner = rapi_endpoint.publish(run, where)
    if owner is not None:
        log.warning(
            "%s belongs to lw-rapi pid %d, which still runs: left as it is",
            run / rapi_endpoint.FILE,
            owner,
        )
    sdnotify.ready(f"serving on {where}")
    watchdog = asyncio.get_running_loop().create_task(sdnotify.watchdog_loop())
    try:
        await wait_for_stop_signal()
    finally:
        sdnotify.stopping()
        rapi_endpoint.withdraw(run)
        watchdog.cancel()
        await runner.cleanup()
    return 0


def main(argv: list[str] | None = None) -> int:
    """Parse the options and serve until SIGTERM."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if (args.ssl_cert is None) != (args.ssl_key is None):
        parser.error("--ssl-cert and --ssl-key go together")
    if not 0 < args.port < 65536:
        parser.error(f"--port must be 1..65535, got {args.port}")
    setup_logging("lw-rapi", args.log_level)
    refusal = plain_http_refusal(args.bind, args.ssl_cert is not None, args.insecure_http)
    if refusal is not None:
        log.error("%s", refusal)
        return 1
    tls = None
    if args.ssl_cert is not None:
        try:
            tls = ssl_context(args.ssl_cert, args.ssl_key)
        except (OSError, ssl.SSLError) as exc:
            log.error(
                "cannot use --ssl-cert %s / --ssl-key %s: %s", args.ssl_cert, args.ssl_key, exc
            )
            return 1
    install_event_loop_policy()
    try:
        code = asyncio.run(serve(args, tls))
    except Exception:
        log.critical("lw-rapi failed", exc_info=True)
        return 1
    log.info("lw-rapi stopped")
    return code
