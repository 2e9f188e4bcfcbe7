"""Death detection (SPEC §3.3): know within milliseconds when a watched process is gone.

A process is named by (pid, start time), so a recycled pid is never mistaken for the
original.  Each watched process gets a pidfd registered with the event loop (readable
when it exits, zombies included); a periodic psutil sweep covers systems without pidfd
and processes whose pidfd could not be opened.  wconfd watches its clients with it,
luxid its job processes (it need not be their parent).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
from collections.abc import Callable

import msgspec
import psutil

log = logging.getLogger(__name__)

# Start times are compared within this tolerance (psutil derives them from clock ticks).
START_TIME_TOLERANCE = 1.0
DEFAULT_SWEEP_INTERVAL = 5.0


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


class ProcessWatcher:
    """Calls `on_death(key)` once for each watched process that ends.

    `watch` is idempotent per key; `unwatch` stops watching without a call.  Runs on
    the current event loop; `start()` begins the fallback sweep.
    """

    def __init__(
        self,
        on_death: Callable[[ProcessKey], None],
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
    ) -> None:
        self._on_death = on_death
        self._sweep_interval = sweep_interval
        self._pidfds: dict[ProcessKey, int] = {}
        self._watched: set[ProcessKey] = set()
        self._sweeper: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Begin the periodic psutil sweep."""
        if self._sweeper is None:
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_forever())

    def stop(self) -> None:
        """Stop the sweep and close every pidfd."""
        if self._sweeper is not None:
            self._sweeper.cancel()
            self._sweeper = None
        for key in list(self._watched):
            self.unwatch(key)

    def watched(self) -> set[ProcessKey]:
        """The processes being watched now."""
        return set(self._watched)

    def watch(self, key: ProcessKey) -> None:
        """Start watching `key`; a process already gone is reported on the next loop turn."""
        if key in self._watched:
            return
        self._watched.add(key)
        loop = asyncio.get_running_loop()
        fd = self._open_pidfd(key.pid)
        if fd is not None:
            self._pidfds[key] = fd
            loop.add_reader(fd, self._reported, key)
        # Checked after the pidfd is open, so a death in between is not missed and a
        # pid already reused by another process is recognised by its start time.
        if not is_alive(key):
            loop.call_soon(self._reported, key)

    def unwatch(self, key: ProcessKey) -> None:
        """Stop watching `key` without reporting it."""
        self._watched.discard(key)
        fd = self._pidfds.pop(key, None)
        if fd is not None:
            with contextlib.suppress(Exception):
                asyncio.get_running_loop().remove_reader(fd)
            os.close(fd)

    def sweep(self) -> list[ProcessKey]:
        """Check every watched process now; report and return the dead ones."""
        dead = [key for key in list(self._watched) if not is_alive(key)]
        for key in dead:
            self._reported(key)
        return dead

    def _reported(self, key: ProcessKey) -> None:
        if key not in self._watched:
            return
        self.unwatch(key)
        try:
            self._on_death(key)
        except Exception:
            log.exception("death handler failed for pid %d", key.pid)

    @staticmethod
    def _open_pidfd(pid: int) -> int | None:
        opener = getattr(os, "pidfd_open", None)
        if opener is None:
            return None
        try:
            return int(opener(pid))
        except OSError:
            return None

    async def _sweep_forever(self) -> None:
        while True:
            await asyncio.sleep(self._sweep_interval)
            try:
                self.sweep()
            except Exception:
                log.exception("death sweep failed")
