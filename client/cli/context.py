"""What every `lw` command shares: the daemons' clients, output streams, and the mapping
of failures to exit codes and to messages that say what to do next.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from client import errors, paths

if TYPE_CHECKING:
    from client import LuxiClient, WConfdClient

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNREACHABLE = 3
EXIT_INTERRUPTED = 130
# How long `lw` waits for a daemon it reached once to come back (a restart): someone is
# waiting at the terminal, so seconds, not the minutes a job process waits.
CLI_PATIENCE = 10.0


class UsageError(Exception):
    """The command line is wrong in a way argparse cannot see (exit 2)."""


class Failed(Exception):
    """The operation or job failed, or was rejected (exit 1)."""


class Context:
    """Per-invocation state: directories, lazily connected clients, output streams.  Both
    clients' audited calls say they act for `cli:<login>` (docs/contracts.md#audit-log)."""

    def __init__(
        self,
        run_dir: str | Path | None = None,
        state_dir: str | Path | None = None,
        *,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
    ) -> None:
        self.run_dir = paths.run_dir(run_dir)
        self.state_dir = paths.state_dir(state_dir)
        self.stdout = stdout or sys.stdout
        self.stderr = stderr or sys.stderr
        self._luxi: LuxiClient | None = None
        self._wconfd: WConfdClient | None = None

    @property
    def luxi(self) -> LuxiClient:
        """The luxid client (connects on first use)."""
        if self._luxi is None:
            from client import LuxiClient
            from client.identity import cli_actor

            self._luxi = LuxiClient(
                self.run_dir / paths.LUXID_SOCKET, patience=CLI_PATIENCE, actor=cli_actor()
            )
        return self._luxi

    @property
    def wconfd(self) -> WConfdClient:
        """The wconfd client, identified as `lw-cli` (connects on first use)."""
        if self._wconfd is None:
            from client import WConfdClient
            from client.identity import cli_actor

            self._wconfd = WConfdClient(
                self.run_dir / paths.WCONFD_SOCKET,
                name="lw-cli",
                patience=CLI_PATIENCE,
                actor=cli_actor(),
            )
        return self._wconfd

    def out(self, text: str = "") -> None:
        """A line on stdout."""
        print(text, file=self.stdout, flush=True)

    def note(self, text: str) -> None:
        """A line on stderr (progress and hints, never data)."""
        print(text, file=self.stderr, flush=True)

    def close(self) -> None:
        """Close the connections."""
        for client in (self._luxi, self._wconfd):
            if client is not None:
                client.close()


def unreachable_message(exc: errors.ConnectionError, run_dir: Path) -> str:
    """What to tell an operator whose daemon did not answer."""
    return (
        f"lw: {exc.message}\n"
        f"lw: the run directory is {run_dir}; if the daemons use another one, pass "
        f"--run-dir DIR or set LW_RUN_DIR"
    )


def not_master_message(exc: errors.NotMaster) -> str:
    """What to tell an operator whose node is a standby."""
    if exc.master is None:
        return "this node is not the master; there is no master right now (retry in a few seconds)"
    return f"this node is not the master; the master is {exc.master}"


def run(handler: Callable[[Context, argparse.Namespace], int], args: argparse.Namespace) -> int:
    """Run a command handler and turn what it raises into an exit code and a message."""
    ctx = Context(args.run_dir, args.state_dir)
    command = " ".join(str(part) for part in (args.command, getattr(args, "action", None)) if part)
    try:
        return handler(ctx, args)
    except UsageError as exc:
        ctx.note(f"lw {command}: error: {exc}\n(see `lw {command} --help`)")
        return EXIT_USAGE
    except Failed as exc:
        ctx.note(f"lw: {exc}")
        return EXIT_FAILED
    except errors.ConnectionError as exc:
        ctx.note(unreachable_message(exc, ctx.run_dir))
        return EXIT_UNREACHABLE
    except errors.NotMaster as exc:
        ctx.note(f"lw: {not_master_message(exc)}")
        return EXIT_FAILED
    except errors.RpcError as exc:
        ctx.note(f"lw: {exc.type_name}: {exc.message}")
        return EXIT_FAILED
    except KeyboardInterrupt:
        ctx.note("lw: interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        # The reader went away (`lw job list | head`): not an error of ours.
        import os

        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return EXIT_OK
    finally:
        ctx.close()
