"""A dependency-free implementation of systemd's ``sd_notify`` protocol
(docs/operations.md#how-the-units-behave).

The Lockwarden units are ``Type=notify`` with ``WatchdogSec=``: each daemon tells systemd
when it is ready (``READY=1``), what it is doing (``STATUS=``), that it is shutting down
(``STOPPING=1``), and that its event loop is still turning (``WATCHDOG=1``).

The protocol: systemd puts the path of an ``AF_UNIX`` ``SOCK_DGRAM`` socket in
``$NOTIFY_SOCKET`` (a path starting with ``/``, or ``@name`` for a Linux abstract socket), and
the service sends it datagrams of newline-separated ``KEY=VALUE`` assignments. See
sd_notify(3).

Every function here is safe to call when the daemon is not run by systemd (no
``$NOTIFY_SOCKET``: a no-op that returns ``False``) and never raises because the socket is
missing, gone or full: a daemon must not die because its supervisor's socket vanished. Such
failures are logged at debug level and reported through the ``bool`` result.

Typical use in a daemon's main coroutine::

    from client._server import sdnotify

    watchdog = asyncio.create_task(sdnotify.watchdog_loop(lambda: server.healthy))
    ...
    sdnotify.ready("serving on /run/lockwarden/wconfd.sock")
    ...
    sdnotify.stopping()

Processes started by a daemon (luxid's job processes) should get
:func:`child_environment` so they do not inherit the notification socket.
"""

from __future__ import annotations

import asyncio
import logging
import os
import socket
from collections.abc import Callable, Mapping

__all__ = [
    "NOTIFY_ENV_VARS",
    "child_environment",
    "notify",
    "ready",
    "status",
    "stopping",
    "watchdog_interval",
    "watchdog_loop",
]

log = logging.getLogger(__name__)

#: Environment variables systemd sets for the notify protocol; children must not inherit them.
NOTIFY_ENV_VARS: tuple[str, ...] = ("NOTIFY_SOCKET", "WATCHDOG_USEC", "WATCHDOG_PID")

#: Upper bound on how long one send may block (systemd's socket queue full). Bounded so a
#: wedged supervisor cannot stall the daemon's event loop for long.
_SEND_TIMEOUT = 1.0


def _address(value: str) -> str | bytes | None:
    """Turn a ``$NOTIFY_SOCKET`` value into a ``sendto`` address, or None if unusable."""
    if value.startswith("@"):
        # Linux abstract namespace: a leading NUL byte instead of "@".
        return b"\0" + value[1:].encode()
    if value.startswith("/"):
        return value
    return None


def _clean(line: str) -> str:
    """One assignment per line: a newline inside a value would inject another assignment."""
    return line.replace("\r", " ").replace("\n", " ")


def notify(*lines: str) -> bool:
    """Send ``lines`` (``KEY=VALUE`` assignments) to ``$NOTIFY_SOCKET`` as one datagram.

    Newlines inside a line are replaced by spaces, so free text (an exception message in
    ``STATUS=``) cannot inject other assignments.

    Returns:
        True if the datagram was sent; False if there is no socket (not run by systemd, or
        nothing to send) or sending failed. Never raises for socket errors.
    """
    value = os.environ.get("NOTIFY_SOCKET")
    if not value or not lines:
        return False
    address = _address(value)
    if address is None:
        log.debug("sd_notify: unsupported NOTIFY_SOCKET %r, not notifying", value)
        return False
    payload = "\n".join(_clean(line) for line in lines).encode()
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            sock.settimeout(_SEND_TIMEOUT)
            sock.sendto(payload, getattr(socket, "MSG_NOSIGNAL", 0), address)
    except OSError as exc:
        log.debug("sd_notify: sending %r to %r failed: %s", payload, value, exc)
        return False
    return True


def ready(status: str | None = None) -> bool:
    """Tell systemd start-up is complete (``READY=1``), optionally with a ``STATUS=`` line.

    Call it once the daemon's socket is bound and accepting: a ``Type=notify`` unit counts as
    started only now, so units ordered ``After=`` it (luxid after wconfd) start only now.
    """
    if status is None:
        return notify("READY=1")
    return notify("READY=1", f"STATUS={status}")


def status(text: str) -> bool:
    """Set the one-line status shown by ``systemctl status`` (``STATUS=``)."""
    return notify(f"STATUS={text}")


def stopping() -> bool:
    """Tell systemd the daemon is shutting down (``STOPPING=1``)."""
    return notify("STOPPING=1")


def watchdog_interval() -> float | None:
    """The watchdog timeout systemd expects, in seconds, or None if no watchdog applies.

    Read from ``$WATCHDOG_USEC`` (microseconds, a positive integer). If ``$WATCHDOG_PID`` is
    set it must equal this process's pid: a child that inherited the variables is not the
    watched process. Missing or malformed values mean no watchdog.
    """
    usec = os.environ.get("WATCHDOG_USEC")
    if not usec:
        return None
    try:
        micros = int(usec)
    except ValueError:
        log.debug("sd_notify: ignoring malformed WATCHDOG_USEC=%r", usec)
        return None
    if micros <= 0:
        return None
    pid = os.environ.get("WATCHDOG_PID")
    if pid:
        try:
            if int(pid) != os.getpid():
                return None
        except ValueError:
            log.debug("sd_notify: ignoring malformed WATCHDOG_PID=%r", pid)
            return None
    return micros / 1_000_000


async def watchdog_loop(is_healthy: Callable[[], bool] | None = None) -> None:
    """Send ``WATCHDOG=1`` every half watchdog interval while the daemon is healthy.

    Run it as a task on the daemon's event loop: because the pings come from the loop
    itself, a blocked loop stops them and systemd restarts the daemon after ``WatchdogSec``.
    ``is_healthy`` (optional) is asked before each ping; while it returns False (or raises)
    no ping is sent, so a daemon that knows it is wedged gets restarted. Returns at once if
    no watchdog applies (see :func:`watchdog_interval`); otherwise runs until cancelled.
    """
    interval = watchdog_interval()
    if interval is None:
        return
    period = interval / 2
    was_healthy = True
    while True:
        try:
            healthy = True if is_healthy is None else bool(is_healthy())
        except Exception:
            log.exception("sd_notify: health check failed; withholding the watchdog ping")
            healthy = False
        if healthy:
            notify("WATCHDOG=1")
        elif was_healthy:
            log.warning("sd_notify: unhealthy; withholding watchdog pings (systemd will restart)")
        was_healthy = healthy
        await asyncio.sleep(period)


def child_environment(env: Mapping[str, str] | None = None) -> dict[str, str]:
    """A copy of ``env`` (default ``os.environ``) without the notify protocol's variables.

    Give this to processes a daemon starts (luxid's job processes) so they never talk to the
    daemon's supervisor. With ``NotifyAccess=main`` systemd would ignore them anyway.
    """
    source = os.environ if env is None else env
    return {k: v for k, v in source.items() if k not in NOTIFY_ENV_VARS}
