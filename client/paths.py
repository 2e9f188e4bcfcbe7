"""Default locations of sockets and state (docs/contracts.md#sockets-and-paths): flags win
over env vars, env over defaults."""

from __future__ import annotations

import os
from pathlib import Path

WCONFD_SOCKET = "wconfd.sock"
LUXID_SOCKET = "luxid.sock"


def default_run_dir() -> Path:
    """`$LW_RUN_DIR`, else /run/lockwarden for root, else the user's runtime dir."""
    if env := os.environ.get("LW_RUN_DIR"):
        return Path(env)
    if os.geteuid() == 0:
        return Path("/run/lockwarden")
    if xdg := os.environ.get("XDG_RUNTIME_DIR"):
        return Path(xdg) / "lockwarden"
    return Path(f"/tmp/lockwarden-{os.getuid()}")


def default_state_dir() -> Path:
    """`$LW_STATE_DIR`, else /var/lib/lockwarden for root, else the user's state dir."""
    if env := os.environ.get("LW_STATE_DIR"):
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/lockwarden")
    if xdg := os.environ.get("XDG_STATE_HOME"):
        return Path(xdg) / "lockwarden"
    return Path.home() / ".local" / "state" / "lockwarden"


def run_dir(flag: str | os.PathLike[str] | None = None) -> Path:
    """The run directory: the flag when given, else the default."""
    return Path(flag) if flag else default_run_dir()


def state_dir(flag: str | os.PathLike[str] | None = None) -> Path:
    """The state directory: the flag when given, else the default."""
    return Path(flag) if flag else default_state_dir()


def wconfd_socket(run: str | os.PathLike[str] | None = None) -> Path:
    """Path of wconfd's socket in the given (or default) run directory."""
    return run_dir(run) / WCONFD_SOCKET


def luxid_socket(run: str | os.PathLike[str] | None = None) -> Path:
    """Path of luxid's socket in the given (or default) run directory."""
    return run_dir(run) / LUXID_SOCKET


RAPI_STATE_DIR = Path("/var/lib/lockwarden-rapi")  # the unit's StateDirectory=


def rapi_state_dir(flag: str | os.PathLike[str] | None, state: Path) -> Path:
    """Where `lw rapi-user` finds lw-rapi's files: the flag, else `$LW_RAPI_STATE_DIR`, else
    /var/lib/lockwarden-rapi when it exists (lw-rapi's own directory under systemd), else
    the state directory `state` (a development stack's lw-rapi reads its users there)."""
    if flag:
        return Path(flag)
    if env := os.environ.get("LW_RAPI_STATE_DIR"):
        return Path(env)
    return RAPI_STATE_DIR if RAPI_STATE_DIR.is_dir() else state
