"""`lw backup DIR` and `lw store copy` (docs/operations.md#backups,
docs/operations.md#moving-to-three-machines; shapes in
docs/contracts.md#backups-and-store-copy).

`lw backup` asks each daemon for its part (`backup`, written below the daemon's own state
directory), copies the parts into `DIR/lockwarden-backup-<ts>/` with a manifest, and
removes what the daemons wrote.  `lw store copy` moves the whole state between state
directories, etcd prefixes and backups; `lw` imports no daemon code, so each daemon's part
is read and written by that daemon's own tool (`python -m wconfd.storecopy`, `python -m
luxid.storecopy`), run here step by step: every check first (the backup's manifest and
hashes, SRC not served, DST not served and empty), then the writes.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from client.backup import (
    FORMAT,
    MANIFEST,
    BackupRefused,
    LuxidPart,
    Manifest,
    WconfdPart,
    backup_name,
    copy_atomic,
    encode_manifest,
    fsync_dir,
    hash_tree,
    is_backup,
    verify,
    write_atomic,
)
from client.cli.context import EXIT_OK, Context, Failed
from client.etcd_security import EtcdSecurity, security_env


def backup(ctx: Context, args: argparse.Namespace) -> int:
    """lw backup DIR: both daemons' parts and a manifest in a new folder of DIR."""
    root = Path(args.dir)
    if not root.is_dir():
        raise Failed(f"{root}: no such directory (lw backup writes into an existing one)")
    now = time.time()
    final = root / backup_name(now)
    if final.exists():
        raise Failed(f"{final} exists already; wait a second and run lw backup again")
    stage = f"lw-{final.name}-{os.getpid()}"
    w = ctx.wconfd.backup(dir=f"{stage}-wconfd")
    x = ctx.luxi.backup(dir=f"{stage}-luxid")
    partial = root / (final.name + ".partial")
    try:
        for part, answer in (("wconfd", w), ("luxid", x)):
            _fetch(Path(answer.path), answer.files, partial / part)
        manifest = Manifest(
            format=FORMAT,
            created=now,
            wconfd=WconfdPart(serial=w.serial or 0),
            luxid=LuxidPart(last_job_id=x.last_job_id or 0),
            files=hash_tree(partial),
        )
        write_atomic(partial / MANIFEST, encode_manifest(manifest))
        os.rename(partial, final)
        fsync_dir(root)
    finally:
        shutil.rmtree(partial, ignore_errors=True)
        for answer in (w, x):
            shutil.rmtree(answer.path, ignore_errors=True)
    ctx.out(str(final))
    return EXIT_OK


def _fetch(source: Path, files: dict[str, str], target: Path) -> None:
    """Copy a daemon's part, checking each file against the hash the daemon answered."""
    target.mkdir(parents=True)
    for name in files:
        copy_atomic(source / name, target / name)
    found = hash_tree(target)
    if found != files:
        raise Failed(f"the copy of {source} differs from what the daemon wrote; try again")
    fsync_dir(target)


def store_copy(ctx: Context, args: argparse.Namespace) -> int:
    """lw store copy --from SRC --to DST [--force]."""
    tool = functools.partial(_tool, security=args.etcd_security)
    force = ["--force"] if args.force else []
    source = Path(args.source)
    manifest = None
    if not args.source.startswith(("etcd://", "etcds://")) and is_backup(source):
        try:
            manifest = verify(source)
        except BackupRefused as exc:
            raise Failed(exc.message) from None
    tool("wconfd", "check", args.target, *force)
    with tempfile.TemporaryDirectory(prefix="lw-store-copy-") as tmp:
        if manifest is not None:
            serial, last = manifest.wconfd.serial, manifest.luxid.last_job_id
            parts = source
        else:  # a stopped state directory or store: its parts, by the daemons' own code
            parts = Path(tmp)
            serial = tool("wconfd", "export", args.source, str(parts / "wconfd"))["serial"]
            last = tool("luxid", "export", args.source, str(parts / "luxid"))["last_job_id"]
        replace = ["--replace"] if args.force else []
        tool("wconfd", "import", str(parts / "wconfd"), args.target, *replace)
        tool("luxid", "import", str(parts / "luxid"), args.target)
    ctx.out(
        f"copied {args.source} to {args.target}: configuration serial {serial}, jobs up to {last}"
    )
    return EXIT_OK


def _tool(daemon: str, *argv: str, security: EtcdSecurity) -> Any:
    """Run one step of a daemon's copy tool (lw's etcd options passed on as LW_ETCD_*);
    its JSON output (None if it printed none).  Failed with the tool's own one-line reason
    when it refuses."""
    done = subprocess.run(
        [sys.executable, "-m", f"{daemon}.storecopy", *argv],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **security_env(security)},
    )
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines()
        raise Failed(lines[-1] if lines else f"{daemon}.storecopy {argv[0]} failed")
    return json.loads(done.stdout) if done.stdout.strip() else None
