"""What every Lockwarden daemon does around its service: options, logging, the socket
claim, the event loop (uvloop when installed) and a clean stop on SIGTERM/SIGINT.
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import fcntl
import gc
import logging
import os
import signal
import socket
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import IO

from client import __version__, paths
from client._server import sdnotify
from client._server.etcd.election import DEFAULT_TTL
from client._server.etcd.errors import AccessRefused
from client._server.etcd.url import EtcdStoreUrl, parse_store_url, secure_store
from client._server.roles import default_node_name
from client._server.server import RpcServer, install_eager_tasks
from client._server.storetarget import claim_state_dir
from client.argparser import StrictParser
from client.audit import RETENTION_DAYS
from client.etcd_security import (
    SecurityError,
    add_security_options,
    security_from_args,
)
from client.protocol import DEFAULT_MAX_MESSAGE_BYTES

log = logging.getLogger(__name__)

EVENT_LOOPS = ("auto", "asyncio", "uvloop")
"""What --event-loop accepts."""

GC_THRESHOLDS = (20_000, 10, 10)
"""The collector's generation thresholds once a daemon serves (Python's default: 700)."""


class SocketBusy(Exception):
    """Another live daemon serves this socket path."""


class StartupError(Exception):
    """A start-up failure with a clear cause (e.g. corrupt state): logged without traceback."""


def new_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """A daemon's argument parser, with the option every daemon has: `--version`."""
    parser = StrictParser(prog=prog, description=description)
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}", help="print the version"
    )
    return parser


def daemon_parser(prog: str, description: str) -> argparse.ArgumentParser:
    """The options every daemon takes; flags win over LW_RUN_DIR / LW_STATE_DIR."""
    parser = new_parser(prog, description)
    parser.add_argument(
        "--state-dir",
        type=Path,
        default=None,
        help="where durable state lives (default: $LW_STATE_DIR, /var/lib/lockwarden for root)",
    )
    parser.add_argument(
        "--run-dir",
        type=Path,
        default=None,
        help="where the sockets live (default: $LW_RUN_DIR, /run/lockwarden for root)",
    )
    parser.add_argument(
        "--max-message-bytes",
        type=int,
        default=DEFAULT_MAX_MESSAGE_BYTES,
        metavar="N",
        help="largest accepted request line; a longer one is refused and the connection "
        "closed (default: 64 MiB)",
    )
    parser.add_argument(
        "--group",
        default=None,
        help="group owning the socket (mode 0660); default: the daemon's own group",
    )
    parser.add_argument(
        "--sweep-interval",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="period of the psutil sweep that backs pidfd watching of client or job "
        "processes (default 5)",
    )
    parser.add_argument(
        "--event-loop",
        choices=EVENT_LOOPS,
        default=os.environ.get("LW_EVENT_LOOP", "auto"),
        help="asyncio's own loop, uvloop, or auto: uvloop when installed "
        "(default: $LW_EVENT_LOOP, else auto)",
    )
    parser.add_argument(
        "--event-retention",
        type=_positive_count,
        default=None,
        metavar="N",
        help="keep only the last N events (docs/contracts.md#events), with no age floor: "
        "for tests of `gap`; default: at least the last 100,000 and at least 10 minutes' worth",
    )
    parser.add_argument(
        "--audit-retention",
        type=_positive_days,
        default=RETENTION_DAYS,
        metavar="DAYS",
        help="drop audit entries older than DAYS (docs/contracts.md#audit-log; at most the "
        "newest 1,000,000 are kept either way; default 90)",
    )
    parser.add_argument(
        "--no-audit",
        action="store_true",
        help="record no audit entries: only to measure what auditing costs (bench/audit.py); "
        "never in production",
    )
    add_role_options(parser)
    add_log_level(parser)
    return parser


def _positive_days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of days") from None
    if not 0 < value < 1e6:
        raise argparse.ArgumentTypeError("must be more than 0 days (and fewer than a million)")
    return value


def _positive_count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _store_url(text: str) -> EtcdStoreUrl:
    try:
        return parse_store_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_role_options(parser: argparse.ArgumentParser) -> None:
    """--store, --node and --lease-ttl (docs/contracts.md#replicated-control-plane): where
    the durable state lives and who this node is. Without --store (or $LW_STORE) the state
    stays in local files."""
    env_store = os.environ.get("LW_STORE") or None
    parser.add_argument(
        "--store",
        type=_store_url,
        default=env_store,  # argparse passes a string default through `type`
        metavar="etcd[s]://HOST:PORT[,HOST:PORT...][/PREFIX]",
        help="keep the durable state in this etcd cluster and fail over between nodes "
        "(default: $LW_STORE, else local files in --state-dir); etcds:// requires TLS "
        "(--etcd-ca)",
    )
    parser.add_argument(
        "--node",
        default=default_node_name(),
        help="this control-plane node's name (default: $LW_NODE, else the host name)",
    )
    parser.add_argument(
        "--lease-ttl",
        type=float,
        default=DEFAULT_TTL,
        metavar="SECONDS",
        help="the master's etcd lease: a dead master is replaced within about this long "
        f"(default {DEFAULT_TTL:g})",
    )
    add_security_options(parser)


def parse_daemon_args(
    parser: argparse.ArgumentParser, argv: list[str] | None
) -> argparse.Namespace:
    """Parse a daemon's options and attach the etcd security options to `--store`; options
    that contradict each other (`etcds://` without `--etcd-ca`, …) end the process with
    exit 1 and a message saying what to give (docs/operations.md#etcd-over-tls)."""
    args = parser.parse_args(argv)
    try:
        security = security_from_args(args)
        if args.store is not None:
            args.store = secure_store(args.store, security)
    except SecurityError as exc:
        print(f"{parser.prog}: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    return args


def add_log_level(parser: argparse.ArgumentParser, extra: str = "") -> None:
    """The --log-level option every Lockwarden daemon takes ($LW_LOG_LEVEL by default)."""
    parser.add_argument(
        "--log-level",
        default=os.environ.get("LW_LOG_LEVEL", "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help=f"logging threshold (default INFO{extra})",
    )


def setup_logging(name: str, level: str) -> None:
    """One line per event on stderr; under systemd journald adds time and pid itself."""
    handler = logging.StreamHandler(sys.stderr)
    prefix = "" if os.environ.get("JOURNAL_STREAM") else f"%(asctime)s {name}[%(process)d] "
    handler.setFormatter(logging.Formatter(prefix + "%(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)


def claim_socket(path: Path) -> IO[bytes]:
    """Make `path` ours: refuse if a live daemon answers there, replace a stale file.

    A lock file beside the socket (held for the daemon's life) closes the race between
    two daemons starting at once; the connect test catches a live daemon that predates it.
    Returns the open lock file, which the caller keeps open.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    lock = open(path.with_name(path.name + ".lock"), "ab")  # noqa: SIM115 - held open
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        raise SocketBusy(f"another daemon holds {path}; stop it first") from None
    if path.exists() or path.is_symlink():
        probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            probe.settimeout(1.0)
            probe.connect(str(path))
        except OSError:
            log.info("replacing stale socket %s", path)
            path.unlink()
        else:
            lock.close()
            raise SocketBusy(f"a live daemon answers on {path}; stop it first")
        finally:
            probe.close()
    return lock


def install_event_loop_policy(choice: str = "auto") -> str:
    """Install the event loop `choice` names; the loop in use ("uvloop" or "asyncio").

    "auto" takes uvloop when it is installed (faster I/O, see the README's dependency
    table), else the stdlib loop; "uvloop" raises ImportError when it is not installed.
    """
    if choice == "asyncio":
        return "asyncio"
    try:
        import uvloop
    except ImportError:
        if choice == "uvloop":
            raise
        return "asyncio"
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    return "uvloop"


_stop_requested: contextvars.ContextVar[asyncio.Event] = contextvars.ContextVar("stop_requested")


def catch_stop_signals() -> None:
    """From now on SIGTERM and SIGINT set this run's stop event instead of killing the
    process: a daemon calls it in its first step, so a stop that arrives while it starts
    (systemd stopping it, a client that saw the socket answer) is a clean stop once it
    serves, never the signal's default death."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    _stop_requested.set(stop)


async def wait_for_stop_signal() -> None:
    """Return when SIGTERM or SIGINT arrives, or at once if one arrived since
    `catch_stop_signals` (which the daemon called first)."""
    await _stop_requested.get().wait()
    log.info("stop requested")


async def _daemon_main(main: Awaitable[None]) -> None:
    """Catch the stop signals first, then run tasks eagerly where Python offers it (3.12+):
    most calls then finish without a trip through the scheduler."""
    catch_stop_signals()
    install_eager_tasks(asyncio.get_running_loop())
    await main


def run_daemon(
    name: str,
    socket_name: str,
    args: argparse.Namespace,
    serve: Callable[[Path, Path], Awaitable[None]],
) -> int:
    """Claim the socket, then run `serve(socket_path, state_dir)` until it returns.

    Exit codes: 0 after a clean stop, 1 when the socket is taken or start-up fails.
    """
    setup_logging(name, args.log_level)
    run = paths.run_dir(args.run_dir)
    state = paths.state_dir(args.state_dir)
    socket_path = run / socket_name
    try:
        state.mkdir(parents=True, exist_ok=True)
        lock = claim_socket(socket_path)
    except (SocketBusy, OSError) as exc:
        log.error("cannot start: %s", exc)
        return 1
    # Held for the daemon's life: `lw store copy` refuses a state directory in use.
    try:
        state_lock = claim_state_dir(state, name)
    except OSError as exc:
        state_lock = None
        log.error("cannot start: %s", exc)
    if state_lock is None:
        log.error(
            "cannot start: another lw-%s uses %s (see %s)", name, state, state / f"{name}.lock"
        )
        lock.close()
        return 1
    try:
        loop_name = install_event_loop_policy(args.event_loop)
    except ImportError:
        log.error("cannot start: --event-loop uvloop, but uvloop is not installed")
        lock.close()
        return 1
    log.info("%s runs on the %s event loop", name, loop_name)
    try:
        asyncio.run(_daemon_main(serve(socket_path, state)))
    except StartupError as exc:
        log.critical("%s cannot run: %s", name, exc)
        return 1
    except AccessRefused as exc:  # etcd refused our certificate or user: say what to fix
        log.critical("%s cannot run: %s", name, exc.message)
        return 1
    except Exception:
        log.critical("%s failed", name, exc_info=True)
        return 1
    finally:
        lock.close()
        state_lock.close()
    log.info("%s stopped", name)
    return 0


def tune_collector() -> None:
    """Set the cyclic garbage collector up for a serving daemon.

    What start-up loaded (the state, the modules) lives as long as the daemon: frozen, no
    full collection walks it again (no collection first: it would delay the first answer
    by a walk over all of it, to find almost nothing).  Each call allocates a few dozen short-lived objects,
    so Python's default of a young collection every 700 allocations ran one every few
    calls and cost luxid about a seventh of its time with 100 event followers (and a
    quarter of its submit rate without any); every `GC_THRESHOLDS[0]` keeps pauses short
    (a young collection walks at most that many objects) at a fraction of the cost.
    """
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


async def serve_until_stopped(server: RpcServer, name: str) -> None:
    """Start `server`, tell systemd we are ready, and stop cleanly on SIGTERM/SIGINT."""
    await server.start()
    tune_collector()
    log.info("%s listening on %s", name, server.socket_path)
    sdnotify.ready(f"serving on {server.socket_path}")
    watchdog = asyncio.get_running_loop().create_task(sdnotify.watchdog_loop())
    try:
        await wait_for_stop_signal()
    finally:
        sdnotify.stopping()
        watchdog.cancel()
        await server.stop()
