"""Where a running lw-rapi listens, published in the run directory for `lw info`.

lw-rapi writes `rapi.json` (`{"url", "pid"}`, atomically) once it listens and removes it
when it stops; `lw info` shows the metrics endpoint only while that process lives, so a file
left by a killed lw-rapi shows nothing rather than a dead address.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

import msgspec
import psutil

FILE = "rapi.json"


class Endpoint(msgspec.Struct, frozen=True):
    """A running lw-rapi: its base URL and process id."""

    url: str
    pid: int


def publish(run_dir: Path, url: str) -> bool:
    """Record this process as the lw-rapi serving `url` (atomic replace); False if the
    run directory cannot take it (lw info then shows no URL; serving goes on)."""
    tmp = run_dir / f".{FILE}.{os.getpid()}"
    try:
        tmp.write_bytes(msgspec.json.encode(Endpoint(url=url, pid=os.getpid())))
        os.replace(tmp, run_dir / FILE)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        return False
    return True


def withdraw(run_dir: Path) -> None:
    """Remove the record if it is this process's."""
    endpoint = _read(run_dir)
    if endpoint is not None and endpoint.pid == os.getpid():
        with contextlib.suppress(FileNotFoundError):
            (run_dir / FILE).unlink()


def _read(run_dir: Path) -> Endpoint | None:
    try:
        return msgspec.json.decode((run_dir / FILE).read_bytes(), type=Endpoint)
    except (OSError, msgspec.DecodeError):
        return None


def metrics_url(run_dir: Path) -> str | None:
    """The `/metrics` URL of the lw-rapi running on this run directory, or None."""
    endpoint = _read(run_dir)
    if endpoint is None or not psutil.pid_exists(endpoint.pid):
        return None
    return endpoint.url.rstrip("/") + "/metrics"
