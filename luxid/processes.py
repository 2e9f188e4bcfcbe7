"""Job processes: starting them (warm zygote or plain exec), watching them, signalling them.

Every job runs in its own process (docs/contracts.md#scheduling-and-job-processes), in its
own session so that it outlives luxid (a crash, a restart, systemd's KillMode=process) and a
Ctrl-C of a foreground luxid.

- `ZygoteSpawner` (the fast path): a `python -m jobproc --zygote` child that has already
  imported jobproc; luxid asks it over a socketpair for a job, it forks one child per job
  and answers the child's pid.  The request carries the job's first directive (what luxid
  would answer the job's `hello`), so the child starts on its first opcode without a
  round trip.  If the zygote is missing or broken, a job is started the plain way and the
  zygote restarted for the next one.
- `ExecSpawner`: `python -m jobproc <job_id>` through posix_spawn (the job says hello).

Children start with SIGTERM and SIGUSR1 blocked; jobproc unblocks them once its handlers
are installed, so a cancel sent right after the start is never lost.

`JobProcesses` watches every job process with pidfds (client._server.procwatch), so a death
is seen within milliseconds whoever the parent is, reaps the ones that are luxid's
children, and signals a process only if it is still the one recorded (pid and start time).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import socket
import sys
from collections.abc import Callable, Mapping
from typing import Protocol

import msgspec

from client._server.procwatch import ProcessWatcher
from client.api.luxi import Directive
from client.identity import ProcessKey, is_alive, start_time_of

log = logging.getLogger(__name__)

# Signals a job process handles; blocked from its birth until its handlers are installed.
JOB_SIGNALS = (signal.SIGTERM, signal.SIGUSR1)
ZYGOTE_READY_TIMEOUT = 30.0


class SpawnError(Exception):
    """A job process could not be started."""


class Spawner(Protocol):
    """Starts the process of a job and returns its pid."""

    async def prepare(self) -> None:
        """Get ready to start jobs (at luxid's start)."""

    async def spawn(self, job_id: int, first: Directive | None) -> int:
        """Start the process of `job_id`; its pid (SpawnError if it cannot).

        `first`: the job's first directive, if the process may take it from here
        instead of asking with `hello`."""

    async def close(self) -> None:
        """Stop what the spawner runs (job processes live on)."""


def _posix_spawn(argv: list[str], env: Mapping[str, str], stdio_fd: int | None = None) -> int:
    """Start `argv` in a new session with the job signals blocked; its pid.

    stdin is /dev/null, or `stdio_fd` for both stdin and stdout (the zygote's channel).
    """
    actions: list[tuple[int, ...] | tuple[int, int, str, int, int]]
    if stdio_fd is None:
        actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0)]
    else:
        actions = [(os.POSIX_SPAWN_DUP2, stdio_fd, 0), (os.POSIX_SPAWN_DUP2, stdio_fd, 1)]
    try:
        return os.posix_spawn(
            argv[0], argv, env, file_actions=actions, setsid=True, setsigmask=JOB_SIGNALS
        )
    except OSError as exc:
        raise SpawnError(f"cannot start {' '.join(argv)}: {exc}") from exc


class ExecSpawner:
    """`python -m jobproc <job_id>`: a fresh interpreter per job."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)

    async def prepare(self) -> None:
        """Nothing to prepare."""

    async def spawn(self, job_id: int, first: Directive | None = None) -> int:
        """A fresh interpreter; it asks for its first directive itself."""
        return _posix_spawn([sys.executable, "-m", "jobproc", str(job_id)], self.env)

    async def close(self) -> None:
        """Nothing to stop."""


class ZygoteSpawner:
    """Forks job processes from a warm `python -m jobproc --zygote` (see the module doc)."""

    def __init__(self, env: Mapping[str, str], reap: Callable[[ProcessKey], None]) -> None:
        self.env = dict(env)
        self._fallback = ExecSpawner(env)
        self._watch_child = reap
        self._writer: asyncio.StreamWriter | None = None
        self._reader_task: asyncio.Task[None] | None = None
        self._ready: asyncio.Future[None] | None = None
        self._waiting: dict[int, asyncio.Future[int]] = {}
        self._lock = asyncio.Lock()

    async def prepare(self) -> None:
        """Start the zygote now, so that the first job does not wait for its imports."""
        try:
            await self._ensure_started()
        except (OSError, SpawnError, TimeoutError, EOFError) as exc:
            log.warning("cannot start the job zygote (%s); jobs will start by exec", exc)
            self._broken(exc)

    async def spawn(self, job_id: int, first: Directive | None = None) -> int:
        try:
            writer = await self._ensure_started()
            fut = self._waiting.get(job_id)
            if fut is None:
                fut = self._waiting[job_id] = asyncio.get_running_loop().create_future()
            line = str(job_id).encode()
            if first is not None:
                line += b" " + msgspec.json.encode(first)
            writer.write(line + b"\n")
            return await asyncio.wait_for(asyncio.shield(fut), ZYGOTE_READY_TIMEOUT)
        except (OSError, SpawnError, TimeoutError, EOFError) as exc:
            log.warning("zygote could not start job %d (%s); using a plain exec", job_id, exc)
            self._broken(exc)
            return await self._fallback.spawn(job_id, first)
        finally:
            self._waiting.pop(job_id, None)

    async def _ensure_started(self) -> asyncio.StreamWriter:
        async with self._lock:
            if self._writer is None or self._writer.is_closing():
                await self._start()
            assert self._ready is not None and self._writer is not None
            await asyncio.wait_for(asyncio.shield(self._ready), ZYGOTE_READY_TIMEOUT)
            return self._writer

    async def _start(self) -> None:
        ours, theirs = socket.socketpair()
        try:
            pid = _posix_spawn(
                [sys.executable, "-m", "jobproc", "--zygote"], self.env, theirs.fileno()
            )
        finally:
            theirs.close()
        start = start_time_of(pid)
        if start is not None:
            self._watch_child(ProcessKey(pid, start))
        reader, self._writer = await asyncio.open_unix_connection(sock=ours)
        self._ready = asyncio.get_running_loop().create_future()
        self._reader_task = asyncio.get_running_loop().create_task(self._read(reader))
        log.info("job zygote started (pid %d)", pid)

    async def _read(self, reader: asyncio.StreamReader) -> None:
        try:
            while line := await reader.readline():
                words = line.decode().split()
                if words == ["ready"]:
                    if self._ready is not None and not self._ready.done():
                        self._ready.set_result(None)
                    continue
                job_id = int(words[0])
                fut = self._waiting.get(job_id)
                if fut is None or fut.done():
                    continue
                if words[1] == "error":
                    fut.set_exception(SpawnError(" ".join(words[2:])))
                else:
                    fut.set_result(int(words[1]))
            raise EOFError("the zygote closed its channel")
        except (OSError, ValueError, IndexError, EOFError) as exc:
            self._broken(exc)

    def _broken(self, cause: BaseException) -> None:
        """Forget the zygote (the next spawn starts a new one); fail whoever waits on it."""
        if self._writer is not None:
            self._writer.close()
        self._writer = None
        for fut in (self._ready, *self._waiting.values()):
            if fut is not None and not fut.done():
                fut.set_exception(EOFError(str(cause)))
                fut.exception()  # mark retrieved: the spawn that awaits it reports it

    async def close(self) -> None:
        """Close the channel: the zygote exits; the jobs it forked live on."""
        if self._reader_task is not None:
            self._reader_task.cancel()
        if self._writer is not None:
            self._writer.close()
            with contextlib.suppress(Exception):
                await self._writer.wait_closed()
        self._writer = None


def signal_process(key: ProcessKey, sig: signal.Signals) -> bool:
    """Send `sig` if the process still is the one recorded; False if it is gone."""
    if not is_alive(key):
        return False
    try:
        os.kill(key.pid, sig)
    except ProcessLookupError:
        return False
    return True


class JobProcesses:
    """Watches job processes and calls `on_exit(job_id, key)` when one is gone."""

    def __init__(
        self,
        make_spawner: Callable[[JobProcesses], Spawner],
        on_exit: Callable[[int, ProcessKey], None],
        sweep_interval: float,
    ) -> None:
        self._on_exit = on_exit
        self._jobs: dict[ProcessKey, int] = {}
        self._by_pid: dict[int, int] = {}  # pid -> job id, of the processes watched
        self.watcher = ProcessWatcher(self._died, sweep_interval)
        self.spawner = make_spawner(self)

    def start_watching(self) -> None:
        """Begin the fallback sweep (pidfds need no task)."""
        self.watcher.start()

    async def prepare(self) -> None:
        """Let the spawner get ready (start the zygote)."""
        await self.spawner.prepare()

    async def close(self) -> None:
        """Stop watching; job processes keep running."""
        await self.spawner.close()
        self.watcher.stop()

    async def spawn(self, job_id: int, first: Directive | None = None) -> ProcessKey:
        """Start the process of `job_id` and watch it; its identity (pid, start time).

        `first`: the job's first directive, handed to the process if the spawner can."""
        pid = await self.spawner.spawn(job_id, first)
        start = start_time_of(pid)
        if start is None:  # gone already: record it anyway, its death is reported at once
            start = 0.0
        key = ProcessKey(pid, start)
        self.attach(job_id, key)
        return key

    def attach(self, job_id: int, key: ProcessKey) -> None:
        """Watch an existing job process (one started by a previous luxid, too)."""
        self._jobs[key] = job_id
        self._by_pid[key.pid] = job_id
        self.watcher.watch(key)

    def job_of_pid(self, pid: int) -> int | None:
        """The job whose watched process has `pid` (None: no job's)."""
        return self._by_pid.get(pid)

    def watch_child(self, key: ProcessKey) -> None:
        """Watch a helper child (the zygote) only to reap it."""
        self.watcher.watch(key)

    def signal(self, key: ProcessKey, sig: signal.Signals) -> bool:
        """Send `sig` if the process still is the one recorded; False if it is gone."""
        return signal_process(key, sig)

    def _died(self, key: ProcessKey) -> None:
        with contextlib.suppress(ChildProcessError, OSError):
            os.waitpid(key.pid, os.WNOHANG)  # our child (plain exec, zygote): reap it
        job_id = self._jobs.pop(key, None)
        if self._by_pid.get(key.pid) == job_id:
            self._by_pid.pop(key.pid, None)
        if job_id is not None:
            self._on_exit(job_id, key)
