"""The warm zygote (docs/contracts.md#scheduling-and-job-processes): a process that has
imported everything a job needs and forks one child per job, so a job starts in a
millisecond instead of paying for a fresh interpreter and its imports.

Protocol on stdin/stdout (a socketpair with luxid): luxid writes `<job_id>\\n`, or
`<job_id> <directive>\\n` with the job's first Directive as compact JSON (what luxid
would answer the job's `hello`: the child then starts without asking); the zygote forks
and answers `<job_id> <pid>\\n` (or `<job_id> error <text>\\n`).  It says `ready\\n`
once loaded and exits when luxid closes the channel; its children live on.

The zygote never starts threads or an event loop, so forking it is safe.  SIGCHLD is
ignored, so the kernel reaps finished children.  SIGTERM and SIGUSR1 stay blocked (luxid
spawned it so): children inherit the mask and unblock once their handlers are in place.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
import time
from pathlib import Path

import msgspec

from client.api.luxi import Directive
from client.identity import start_time_of
from jobproc.runner import run_job

_directive = msgspec.json.Decoder(Directive)

log = logging.getLogger(__name__)


def preload() -> None:
    """Import and initialise what every job uses, once, before any fork.

    The loaded objects are then moved out of the garbage collector's sight
    (`gc.freeze`): a child's collections would otherwise touch every one of them and
    copy most of the zygote's memory page by page.
    """
    from client.api.luxi import Check, Finish, Hello, Log, Priority, Running, Waiting
    from jobproc.opcodes import get_opcode_class, known_op_ids

    # msgspec builds a type's codec on its first use: build them here, not in every child.
    for op_id in known_op_ids():  # loads the built-in opcodes and the plugins too
        with contextlib.suppress(msgspec.ValidationError):
            msgspec.convert({}, get_opcode_class(op_id).Params, strict=True)
    msgspec.json.encode(
        [Hello(), Check(0), Waiting(0), Running(0), Log(0, 0, "", ""), Priority(0, 0),
         Finish(0, "success")]
    )  # fmt: skip
    start_time_of(os.getpid())  # reads the boot time identify needs, once for all jobs
    gc.collect()
    gc.freeze()


def serve(run_dir: Path) -> int:
    """Answer spawn requests until luxid closes the channel."""
    preload()
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    # When luxid goes away, so do we (the jobs we forked live on).
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        _serve(run_dir)
    return 0


def _serve(run_dir: Path) -> None:
    os.write(1, b"ready\n")
    for line in sys.stdin.buffer:
        word, _, first = line.strip().partition(b" ")
        try:
            job_id = int(word)
        except ValueError:
            log.error("ignoring a bad request %r", line[:200])
            continue
        try:
            pid = os.fork()
        except OSError as exc:
            os.write(1, f"{job_id} error {exc}\n".encode())
            continue
        if pid == 0:
            _child(job_id, run_dir, first)
        os.write(1, f"{job_id} {pid}\n".encode())


def _child(job_id: int, run_dir: Path, first: bytes) -> None:
    """In the forked child: leave the zygote's session and channel, run the job, exit.

    `first`: the job's first directive (JSON), or empty: the job asks luxid with hello.
    """
    forked = time.time()
    code = 1
    try:
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.dup2(2, 1)
        os.close(devnull)
        code = run_job(job_id, run_dir, _directive.decode(first) if first else None, forked)
    except BaseException:
        log.exception("job %d failed in its process", job_id)
    finally:
        os._exit(code)
