"""Process identity: a process named by (pid, start time), so a recycled pid is never
mistaken for the original.

Clients use it to identify themselves (a job process sends its own start time); the
daemons use it to tell whether a client or job process still runs.  Reading a start time
is one open/read/close of /proc/<pid>/stat, computed as psutil computes it.
"""

from __future__ import annotations

import functools
import os
import pwd

import msgspec
import psutil

from client.audit import ACTOR_MAX

# Start times are compared within this tolerance (psutil derives them from clock ticks).
START_TIME_TOLERANCE = 1.0


class ProcessKey(msgspec.Struct, frozen=True):
    """A process identity that survives pid reuse."""

    pid: int
    start_time: float


@functools.cache
def _boot_time() -> float:
    """The system's boot time, read once: psutil re-reads /proc/stat on every create_time
    (half a millisecond per job in luxid, which asks several times per job)."""
    return float(psutil.boot_time())


def _proc_stat(pid: int) -> tuple[str, float] | None:
    """(state letter, start time) from /proc/<pid>/stat, as psutil computes the start
    time, or None if there is no such process (or no /proc: then psutil is asked)."""
    try:
        data = _read_small(f"/proc/{pid}/stat")
    except FileNotFoundError:
        return None if os.path.isdir("/proc/self") else _psutil_stat(pid)
    except OSError:
        return None
    # The name (2nd field) may hold spaces and parentheses: the fields follow its last ')'.
    fields = data[data.rfind(b")") + 2 :].split()
    return fields[0].decode(), int(fields[19]) / _CLOCK_TICKS + _boot_time()


def _read_small(path: str) -> bytes:
    """A small file's bytes in three system calls (open, read, close): a buffered open()
    adds six more (fstat, ioctl, lseek, ...), and this runs several times per job."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        return os.read(fd, 4096)  # /proc/<pid>/stat is one read, well under a page
    finally:
        os.close(fd)


def _psutil_stat(pid: int) -> tuple[str, float] | None:
    try:
        proc = psutil.Process(pid)
        zombie = proc.status() == psutil.STATUS_ZOMBIE
        return ("Z" if zombie else "R"), float(proc.create_time())
    except (psutil.NoSuchProcess, psutil.ZombieProcess, psutil.AccessDenied, ValueError):
        return None


_CLOCK_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def start_time_of(pid: int) -> float | None:
    """The process's start time as psutil reports it, or None if it does not exist."""
    if pid <= 0:
        return None
    stat = _proc_stat(pid)
    return None if stat is None else stat[1]


def is_alive(key: ProcessKey) -> bool:
    """True if `key.pid` runs, is not a zombie and started at `key.start_time`."""
    if key.pid <= 0:
        return False
    stat = _proc_stat(key.pid)
    if stat is None:
        return False
    state, start = stat
    return abs(start - key.start_time) <= START_TIME_TOLERANCE and state not in ("Z", "X")


def cli_actor() -> str:
    """Whom `lw` acts for in the audit log (docs/contracts.md#audit-log): `cli:<name of its
    real uid>` (`cli:uid:<n>` for a uid with no passwd entry)."""
    uid = os.getuid()
    try:
        name = pwd.getpwuid(uid).pw_name
    except KeyError:
        name = f"uid:{uid}"
    return f"cli:{name}"[:ACTOR_MAX]
