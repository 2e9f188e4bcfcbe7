"""Where a running lw-rapi listens, published in the run directory for `lw info`.

lw-rapi writes `rapi.json` (`{"url", "pid"}`, atomically) once it listens and removes it
when it stops; `lw info` shows the metrics endpoint only while that process lives, so a file
left by a killed lw-rapi shows nothing rather than a dead address.  While the pid in the
file lives, no other lw-rapi overwrites or removes it (a second one on another port leaves
the first one's record alone); the check and the write happen under a lock file.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

import msgspec
import psutil

FILE = "rapi.json"


class Endpoint(msgspec.Struct, frozen=True):
    """A running lw-rapi: its base URL and process id."""

    url: str
    pid: int


@contextlib.contextmanager
def _locked(run_dir: Path) -> Iterator[None]:
    with open(run_dir / f".{FILE}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _other_owner(run_dir: Path) -> int | None:
    """The pid of another live lw-rapi that the record names, if any (a pid reused by
    another program since does not count; one we may not look at does)."""
    endpoint = _read(run_dir)
    if endpoint is None or endpoint.pid == os.getpid():
        return None
    try:
        cmdline = psutil.Process(endpoint.pid).cmdline()
    except psutil.NoSuchProcess:
        return None
    except psutil.Error:
        return endpoint.pid
    return endpoint.pid if any("lw-rapi" in part for part in cmdline) else None


def publish(run_dir: Path, url: str) -> int | None:
    """Record this process as the lw-rapi serving `url` (atomic replace), unless another
    live lw-rapi's record is there: then its pid (and the record stays).  A run directory
    that cannot take the record is no error (lw info then shows no URL; serving goes on)."""
    tmp = run_dir / f".{FILE}.{os.getpid()}"
    try:
        with _locked(run_dir):
            owner = _other_owner(run_dir)
            if owner is not None:
                return owner
            tmp.write_bytes(msgspec.json.encode(Endpoint(url=url, pid=os.getpid())))
            os.replace(tmp, run_dir / FILE)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
    return None


def withdraw(run_dir: Path) -> None:
    """Remove the record if it is this process's."""
    with contextlib.suppress(OSError), _locked(run_dir):
        endpoint = _read(run_dir)
        if endpoint is not None and endpoint.pid == os.getpid():
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
