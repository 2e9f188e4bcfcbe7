"""The ends of `lw store copy` (docs/contracts.md#backups-and-store-copy): a state directory
or an etcd prefix, whether a daemon serves it, whether it is empty, clearing it, and
holding it while a part is written.  Shared by wconfd.storecopy and luxid.storecopy, which
each move their own daemon's part with their own storage code.

Who serves: a daemon holds `<state dir>/<daemon>.lock` (an flock, with its pid inside)
for its whole life (`claim_state_dir`), so a copy sees a running daemon on a state
directory; on etcd the leader key (`P/leader`, on the master's lease) names the node
whose wconfd serves.  A copy holds the same: the lock of the part it writes, or the
leader key under a lease of its own (node `lw store copy`), so no daemon starts serving
half a copy, and its etcd writes are fenced like the master's.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import fcntl
import json
import os
import shutil
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Final

from client._server.etcd.errors import EtcdError
from client._server.etcd.url import EtcdStoreUrl, parse_store_url, secure_store
from client._server.etcd.wire import cmp_create, op_delete, op_put, op_range, prefix_end
from client.errors import StorageError
from client.etcd_security import security_from_env

if TYPE_CHECKING:  # imported where a client is made: the daemons on local files never load it
    from client._server.etcd.client import EtcdClient

DAEMONS: Final = ("wconfd", "luxid")
COPY_NODE: Final = "lw store copy"
"""The leader key's value while a copy writes an etcd prefix."""
LEASE_TTL: Final = 10


class Refused(Exception):
    """A copy that must not go on: `message` is the one line that says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Target:
    """One end of a copy: a local state directory (`path`) or an etcd prefix (`url`)."""

    text: str
    path: Path | None = None
    url: EtcdStoreUrl | None = None


def parse_target(text: str) -> Target:
    """`etcd://…` / `etcds://…` is a store (its path the prefix), anything else a path.
    Refused if the URL cannot be read."""
    if text.startswith(("etcd://", "etcds://")):
        try:
            # The etcd options come from LW_ETCD_* (lw passes its own on so).
            return Target(text, url=secure_store(parse_store_url(text), security_from_env()))
        except ValueError as exc:  # SecurityError included
            raise Refused(f"{text}: {exc}") from None
    return Target(text, path=Path(text))


def lock_path(state_dir: Path, daemon: str) -> Path:
    """The lock file a daemon holds in its state directory while it runs."""
    return state_dir / f"{daemon}.lock"


def claim_state_dir(state_dir: Path, daemon: str) -> IO[bytes] | None:
    """Hold `<state_dir>/<daemon>.lock` with this process's pid in it; the open file
    (keep it open), or None when another live process holds it (its pid is inside)."""
    lock = open(lock_path(state_dir, daemon), "a+b")  # noqa: SIM115 - held open
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        return None
    lock.truncate(0)
    lock.write(f"{os.getpid()}\n".encode())
    lock.flush()
    return lock


def served_locally(state_dir: Path) -> str | None:
    """`lw-<daemon> (pid N)` of a daemon holding the state directory's lock, else None."""
    for daemon in DAEMONS:
        path = lock_path(state_dir, daemon)
        if not path.exists():
            continue
        with open(path, "rb") as f:
            try:
                fcntl.flock(f, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                pid = f.read().decode(errors="replace").strip() or "?"
                return f"lw-{daemon} (pid {pid})"
    return None


async def served_on_etcd(client: EtcdClient, url: EtcdStoreUrl) -> str | None:
    """`lw-wconfd (node NAME)` while a master's lease holds the prefix's leader key."""
    kv = await client.get(_leader(url))
    if kv is None:
        return None
    return f"lw-wconfd (node {kv.value.decode(errors='replace')})"


def _leader(url: EtcdStoreUrl) -> bytes:
    return f"{url.prefix.rstrip('/')}/leader".encode()


def _root(url: EtcdStoreUrl) -> bytes:
    return f"{url.prefix.rstrip('/')}/".encode()


async def is_empty_on_etcd(client: EtcdClient, url: EtcdStoreUrl) -> bool:
    """Whether no key exists under the prefix."""
    root = _root(url)
    answer = await client.range(root, range_end=prefix_end(root), count_only=True)
    return not answer.count


def is_empty_locally(path: Path) -> bool:
    """Whether the directory does not exist or has no entries."""
    return not path.exists() or not any(path.iterdir())


def check(target: Target, role: str, *, force: bool = False) -> None:
    """Refused unless `target` may be read (`role` "SRC": no daemon serves it) or written
    (`role` "DST": no daemon serves it, and it is empty unless `force`)."""
    if target.path is not None:
        served = served_locally(target.path) if target.path.is_dir() else None
        empty = is_empty_locally(target.path)
    else:
        assert target.url is not None
        served, empty = asyncio.run(_etcd_state(target.url))
    if served is not None:
        if role == "SRC":
            raise Refused(f"SRC is served by {served}; take a backup (lw backup DIR) and copy that")
        raise Refused(f"DST is served by {served}; stop it first")
    if role == "DST" and not empty and not force:
        raise Refused("DST is not empty (--force replaces it)")


async def _etcd_state(url: EtcdStoreUrl) -> tuple[str | None, bool]:
    async with etcd_client(url) as client:
        return await served_on_etcd(client, url), await is_empty_on_etcd(client, url)


@contextlib.asynccontextmanager
async def etcd_client(url: EtcdStoreUrl) -> AsyncIterator[EtcdClient]:
    """A client of the store's cluster; Refused (saying so) when etcd cannot be reached."""
    from client._server.etcd.client import EtcdClient

    client = EtcdClient(url.endpoints, security=url.security)
    try:
        yield client
    except EtcdError as exc:
        raise Refused(f"{url.prefix}: etcd: {exc.message}") from None
    finally:
        await client.close()


def clear_locally(path: Path) -> None:
    """Remove every entry of the directory (`--force`: DST is replaced whole)."""
    if not path.exists():
        return
    for entry in path.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


async def clear_on_etcd(client: EtcdClient, url: EtcdStoreUrl) -> None:
    """Delete every key under the prefix, in one transaction that holds only while no
    leader key exists (Refused: a daemon serves it)."""
    root = _root(url)
    answer = await client.txn(
        [cmp_create(_leader(url), 0)],
        [op_delete(root, range_end=prefix_end(root))],
        [op_range(_leader(url))],
    )
    if not answer.succeeded:
        raise Refused("DST is served by lw-wconfd; stop it first")


@contextlib.contextmanager
def hold_locally(path: Path, daemon: str) -> Iterator[None]:
    """Hold the daemon's lock of a state directory while its part is written there."""
    path.mkdir(parents=True, exist_ok=True)
    lock = claim_state_dir(path, daemon)
    if lock is None:
        raise Refused(f"DST is served by {served_locally(path)}; stop it first")
    try:
        yield
    finally:
        lock.close()


@contextlib.asynccontextmanager
async def hold_on_etcd(client: EtcdClient, url: EtcdStoreUrl) -> AsyncIterator[int]:
    """Take the prefix's leader key under a lease of the copy's own for the block; the
    key's create revision, the token that fences the copy's writes.  The lease is
    revoked at the end (the key goes with it).  Refused when a daemon holds the key."""
    lease = (await client.lease_grant(LEASE_TTL)).ID
    key = _leader(url)
    answer = await client.txn(
        [cmp_create(key, 0)], [op_put(key, COPY_NODE, lease=lease)], [op_range(key)]
    )
    if not answer.succeeded:
        await client.lease_revoke(lease)
        raise Refused(f"DST is served by {await served_on_etcd(client, url)}; stop it first")
    token = answer.header.revision
    keepalive = asyncio.get_running_loop().create_task(_keep(client, lease))
    try:
        yield token
    finally:
        keepalive.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await keepalive
        with contextlib.suppress(EtcdError):
            await client.lease_revoke(lease)


async def _keep(client: EtcdClient, lease: int) -> None:
    """Renew the copy's lease until cancelled."""
    while True:
        await asyncio.sleep(LEASE_TTL / 3)
        with contextlib.suppress(EtcdError):
            await client.lease_keepalive(lease)


# -- the daemons' copy tools -------------------------------------------------------------

Export = Callable[[Target, Path], dict[str, int]]
"""A part's export: read the stopped SRC, write the part into the folder; its figures."""
Import = Callable[[Path, Target], None]
"""A part's import: write the part read from the folder into DST."""


def run_tool(prog: str, argv: list[str] | None, export: Export, write: Import) -> int:
    """The command line of a daemon's copy tool (`python -m wconfd.storecopy`, `python -m
    luxid.storecopy`), which `lw store copy` runs step by step:

    - `export SRC FOLDER`: the part of a stopped SRC into FOLDER (the backup's layout);
      prints its figures as JSON;
    - `check DST [--force]`: DST may be written (no daemon serves it; empty unless
      --force); writes nothing;
    - `import FOLDER DST [--replace]`: the part into DST (--replace clears DST first).

    A refusal prints its one line on stderr and exits 1."""
    parser = argparse.ArgumentParser(prog=prog, description=run_tool.__doc__)
    steps = parser.add_subparsers(dest="step", required=True)
    out = steps.add_parser("export")
    out.add_argument("src")
    out.add_argument("folder", type=Path)
    chk = steps.add_parser("check")
    chk.add_argument("dst")
    chk.add_argument("--force", action="store_true")
    into = steps.add_parser("import")
    into.add_argument("folder", type=Path)
    into.add_argument("dst")
    into.add_argument("--replace", action="store_true")
    args = parser.parse_args(argv)
    try:
        if args.step == "export":
            src = parse_target(args.src)
            check(src, "SRC")
            args.folder.mkdir(parents=True, exist_ok=True)
            print(json.dumps(export(src, args.folder)))
        elif args.step == "check":
            check(parse_target(args.dst), "DST", force=args.force)
        else:
            dst = parse_target(args.dst)
            check(dst, "DST", force=True)
            if args.replace:
                clear(dst)
            write(args.folder, dst)
    except Refused as exc:
        print(exc.message, file=sys.stderr)
        return 1
    except (StorageError, OSError) as exc:
        print(f"{prog} {args.step}: {exc}", file=sys.stderr)
        return 1
    return 0


def clear(target: Target) -> None:
    """Empty the target whole (`--force`)."""
    if target.path is not None:
        clear_locally(target.path)
        return
    url = target.url
    assert url is not None

    async def run() -> None:
        async with etcd_client(url) as client:
            await clear_on_etcd(client, url)

    asyncio.run(run())
