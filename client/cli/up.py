"""`lw up [--demo] [--ha N]`: the development stack (docs/contracts.md#the-two-commands) in
the foreground.

Starts lw-wconfd, lw-luxid and lw-rapi as children on the run and state directories, one
after the other, each once the previous one answers; prints where they listen; then
watches them.  Ctrl-C or SIGTERM stops them in reverse order; if one of them dies, the
others are stopped and `lw up` exits 1.  With `--demo` an empty cluster gets three nodes
(OP_NODE_ADD jobs through luxid) and the RAPI allows anonymous reads.  With `--ha N` it
starts a local three-member etcd and N control-plane nodes instead (client.cli.up_ha).
"""

from __future__ import annotations

import argparse
import contextlib
import signal
import time
from collections.abc import Callable, Iterator
from types import FrameType
from typing import NoReturn

from client import errors
from client.cli.children import Child, daemon_argv
from client.cli.context import EXIT_FAILED, EXIT_OK, Context, Failed, UsageError
from client.cli.up_ha import ha_stack

START_TIMEOUT = 30.0
DEMO_NODES = (("node1", "192.0.2.1"), ("node2", "192.0.2.2"), ("node3", "192.0.2.3"))


class _Stop(Exception):
    """SIGINT or SIGTERM arrived."""


def _wait_until(child: Child, answers: Callable[[], bool]) -> None:
    """Poll `answers` until it is true; Failed if the child exits or time runs out."""
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        code = child.exited()
        if code is not None:
            raise Failed(
                f"lw-{child.name} exited with code {code} while starting (see its log above)"
            )
        if answers():
            return
        if time.monotonic() > deadline:
            raise Failed(f"lw-{child.name} did not answer within {START_TIMEOUT:.0f} s")
        time.sleep(0.05)


def _rpc_answers(ctx: Context, name: str) -> Callable[[], bool]:
    def ping() -> bool:
        client = ctx.wconfd if name == "wconfd" else ctx.luxi
        try:
            return bool(client.ping() == "pong")
        except errors.ConnectionError:
            return False

    return ping


def _http_answers(host: str, port: int) -> Callable[[], bool]:
    def version() -> bool:
        import http.client

        conn = http.client.HTTPConnection(host, port, timeout=2)
        try:
            conn.request("GET", "/version")
            return conn.getresponse().status == 200
        except OSError:
            return False
        finally:
            conn.close()

    return version


@contextlib.contextmanager
def _stop_signals() -> Iterator[None]:
    """Turn SIGINT/SIGTERM into _Stop while the stack runs; ignore them while stopping."""

    def handler(signum: int, frame: FrameType | None) -> None:
        raise _Stop(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig in previous:
            signal.signal(sig, signal.SIG_IGN)


def _children(ctx: Context, args: argparse.Namespace) -> list[tuple[Child, Callable[[], bool]]]:
    run, state = str(ctx.run_dir), str(ctx.state_dir)
    dirs = ["--run-dir", run, "--state-dir", state, "--log-level", args.log_level]
    stack = []
    for name in ("wconfd", "luxid"):
        sock = ctx.run_dir / f"{name}.sock"
        child = Child(name, [*daemon_argv(name), *dirs], str(sock))
        stack.append((child, _rpc_answers(ctx, name)))
    if not args.no_rapi:
        host = args.rapi_bind
        rapi_argv = [*daemon_argv("rapi"), *dirs, "--bind", host, "--port", str(args.rapi_port)]
        if args.demo:
            rapi_argv.append("--allow-anonymous-read")
        if args.rapi_insecure_http:
            rapi_argv.append("--insecure-http")
        probe = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(host, host)
        shown = f"[{host}]" if ":" in host else host
        child = Child("rapi", rapi_argv, f"http://{shown}:{args.rapi_port}/")
        stack.append((child, _http_answers(probe, args.rapi_port)))
    return stack


def _demo(ctx: Context) -> None:
    """Three nodes in an empty cluster, added by OP_NODE_ADD jobs.  A failure is reported
    and the stack keeps running (a filter may reject the jobs, say)."""
    from client.cli.jobs import opcode, submit_and_wait

    if ctx.wconfd.list_objects(kind="node"):
        ctx.out("demo: the cluster has nodes already; left as it is")
        return
    job_args = argparse.Namespace(command="up", submit=False, priority=None, reason="lw up --demo")
    try:
        for name, ip in DEMO_NODES:
            submit_and_wait(
                ctx, job_args, [opcode("OP_NODE_ADD", job_args, node_name=name, primary_ip=ip)]
            )
    except (Failed, errors.RpcError) as exc:
        if isinstance(exc, errors.ConnectionError):
            raise
        ctx.note(f"demo: could not add the demo nodes ({exc}); the stack keeps running")
        return
    ctx.out(f"demo: added nodes {', '.join(n for n, _ in DEMO_NODES)}")


def up(ctx: Context, args: argparse.Namespace) -> int:
    """lw up [--demo] [--ha N]"""
    if args.tls and not args.ha:
        raise UsageError("--tls goes with --ha N (it secures the local etcd members)")
    if args.ha:
        args.no_rapi = True  # one RAPI per node is not part of trying failover
    if not args.no_rapi and not 0 < args.rapi_port < 65536:
        raise UsageError(f"--rapi-port must be 1..65535, got {args.rapi_port}")
    ctx.run_dir = ctx.run_dir.absolute()
    ctx.state_dir = ctx.state_dir.absolute()
    groups = ha_stack(ctx, args) if args.ha else [[member] for member in _children(ctx, args)]
    stack = [member for group in groups for member in group]
    code = EXIT_OK
    with _stop_signals():
        try:
            for group in groups:
                for child, answers in group:
                    if answers():
                        raise Failed(
                            f"a {child.name} already answers on {child.where}; stop it first, "
                            "or use another --run-dir (and --rapi-port)"
                        )
                    child.start()
                for child, answers in group:
                    _wait_until(child, answers)
                    ctx.out(f"lw up: {child.name:<6} ready on {child.where} (pid {child.pid})")
            if args.demo and not args.ha:
                _demo(ctx)
            there = f"{ctx.run_dir}/node1" if args.ha else ctx.run_dir
            ctx.out(f"lw up: state in {ctx.state_dir}; try `lw --run-dir {there} info`")
            ctx.out("lw up: running; Ctrl-C stops everything")
            _watch([child for child, _ in stack])
        except _Stop as stop:
            ctx.out(f"lw up: {stop}: stopping")
        except Failed as exc:
            ctx.note(f"lw up: {exc}")
            code = EXIT_FAILED
        except errors.RpcError as exc:
            ctx.note(f"lw up: {exc}; stopping")
            code = EXIT_FAILED
        finally:
            ctx.close()
            for child, _ in reversed(stack):
                child.stop()
    ctx.out("lw up: stopped")
    return code


def _watch(children: list[Child]) -> NoReturn:
    """Wait until a daemon exits: Failed (the caller stops the rest)."""
    while True:
        for child in children:
            code = child.exited()
            if code is not None:
                raise Failed(f"lw-{child.name} exited with code {code}")
        time.sleep(0.2)
