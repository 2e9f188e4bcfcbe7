"""The daemons `lw up` runs as child processes: how to start, watch and stop one, and the
command line of a Lockwarden daemon.  Shared by the plain stack (client.cli.up) and the
replicated one (client.cli.up_ha).
"""

from __future__ import annotations

import contextlib
import shutil
import signal
import subprocess
import sys
from pathlib import Path

STOP_TIMEOUT = 10.0


class Child:
    """One daemon of the stack."""

    def __init__(self, name: str, argv: list[str], where: str) -> None:
        self.name = name
        self.argv = argv
        self.where = where
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start it in its own process group (Ctrl-C reaches `lw up` only, which stops the
        daemons in order); it gets SIGTERM if `lw up` itself dies."""
        self.proc = subprocess.Popen(self.argv, process_group=0, preexec_fn=_die_with_parent)

    @property
    def pid(self) -> int | None:
        """Its pid once started."""
        return None if self.proc is None else self.proc.pid

    def exited(self) -> int | None:
        """Its exit code once it has exited."""
        return None if self.proc is None else self.proc.poll()

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after STOP_TIMEOUT; its exit code."""
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def _die_with_parent() -> None:
    """In the child: ask Linux for SIGTERM when the parent dies (best effort)."""
    with contextlib.suppress(Exception):
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def daemon_argv(name: str) -> list[str]:
    """How to run `lw-<name>`: the console script beside this Python, on PATH, or `-m`."""
    script = Path(sys.executable).parent / f"lw-{name}"
    if script.exists():
        return [str(script)]
    found = shutil.which(f"lw-{name}")
    return [found] if found else [sys.executable, "-m", name]
