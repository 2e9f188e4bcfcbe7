"""Backups of the control plane (docs/operations.md#backups, shapes in
docs/contracts.md#backups-and-store-copy): the rule for the `dir` a daemon's `backup` takes,
the manifest of a backup directory, and the file helpers both sides share.

A backup directory holds each daemon's part in a folder of its own, each in the very
format of that daemon's local state directory, so a part is read and written by the
daemon's own storage code:

    lockwarden-backup-<YYYYmmddTHHMMSSZ>/
        manifest.json              {"format": 1, "created", "wconfd": {"serial"},
                                    "luxid": {"last_job_id"}, "files": {path: sha256}}
        wconfd/wconfd.snapshot.json
        luxid/jobs.sqlite

(The audit log, once it exists, is one more file of each part, listed in `files` like the
others.)
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from pathlib import Path, PurePosixPath
from typing import Final

import msgspec

from client.api.common import BACKUPS, check_backup_dir

__all__ = ["BACKUPS", "check_backup_dir"]

FORMAT: Final = 1
MANIFEST: Final = "manifest.json"
REQUIRED: Final = ("wconfd/wconfd.snapshot.json", "luxid/jobs.sqlite")
"""The files every backup of this format holds (a copy needs them all)."""


class BackupRefused(Exception):
    """A backup that cannot be used: `message` is the one line that says why."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class WconfdPart(msgspec.Struct, frozen=True):
    """The manifest's `wconfd` entry: the configuration's serial in the backup."""

    serial: int


class LuxidPart(msgspec.Struct, frozen=True):
    """The manifest's `luxid` entry: the highest job id allocated in the backup."""

    last_job_id: int


class Manifest(msgspec.Struct, frozen=True):
    """manifest.json: what a backup holds and each file's SHA-256 (the manifest excluded)."""

    format: int
    created: float
    wconfd: WconfdPart
    luxid: LuxidPart
    files: dict[str, str]


def backup_name(now: float) -> str:
    """The folder name `lw backup` gives a backup taken at `now` (UTC)."""
    return "lockwarden-backup-" + time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(now))


def sha256_file(path: str | os.PathLike[str]) -> str:
    """The lowercase hex SHA-256 of a file's contents."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def hash_tree(root: Path) -> dict[str, str]:
    """{path relative to `root` (with `/`): sha256} of every file under it, the manifest
    excluded, sorted by path."""
    found = {}
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = path.relative_to(root).as_posix()
        if name != MANIFEST:
            found[name] = sha256_file(path)
    return found


def fsync_dir(path: Path) -> None:
    """Make a directory's entries (new, renamed files) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_atomic(path: Path, data: bytes) -> None:
    """Replace `path` with `data` durably: a temp file beside it, fsync, rename, fsync of
    the directory (a crash leaves the old file or the new one, never a part)."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_dir(path.parent)


def copy_atomic(source: Path, target: Path) -> None:
    """Copy a file durably and atomically (as `write_atomic`), in chunks."""
    tmp = target.with_name(target.name + ".tmp")
    with open(source, "rb") as src, open(tmp, "wb") as dst:
        while chunk := src.read(1 << 20):
            dst.write(chunk)
        dst.flush()
        os.fsync(dst.fileno())
    os.replace(tmp, target)
    fsync_dir(target.parent)


def copy_sqlite(source: Path, target: Path) -> None:
    """Copy the SQLite database at `source`, while others write it, to a new file
    `target`: SQLite's online backup (one read transaction: the copy is of one commit),
    self-contained (no -wal beside it), written under a temporary name, synced, renamed."""
    tmp = target.with_name(target.name + ".tmp")
    tmp.unlink(missing_ok=True)
    src = sqlite3.connect(source.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        dst = sqlite3.connect(tmp)
        try:
            src.backup(dst)
            dst.execute("PRAGMA journal_mode=DELETE")
        finally:
            dst.close()
    finally:
        src.close()
    replace_durably(tmp, target)


def replace_durably(tmp: Path, target: Path) -> None:
    """Sync the finished file `tmp`, rename it to `target`, sync the directory."""
    fd = os.open(tmp, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, target)
    fsync_dir(target.parent)


def encode_manifest(manifest: Manifest) -> bytes:
    """manifest.json's contents (indented, a newline at the end)."""
    return msgspec.json.format(msgspec.json.encode(manifest), indent=2) + b"\n"


def is_backup(path: Path) -> bool:
    """Whether `path` is a backup directory (it holds a manifest.json)."""
    return (path / MANIFEST).is_file()


def verify(root: Path) -> Manifest:
    """The manifest of the backup at `root` once every listed file is there with its
    SHA-256; BackupRefused naming the first file that is not (or an unknown format)."""
    try:
        raw = msgspec.json.decode((root / MANIFEST).read_bytes())
    except (OSError, msgspec.DecodeError) as exc:
        raise BackupRefused(f"{MANIFEST}: cannot be read: {exc}") from None
    found = raw.get("format") if isinstance(raw, dict) else None
    if found != FORMAT:
        raise BackupRefused(
            f"{MANIFEST}: unknown backup format {found} (this lw reads format {FORMAT})"
        )
    try:
        manifest = msgspec.convert(raw, Manifest)
    except msgspec.ValidationError as exc:
        raise BackupRefused(f"{MANIFEST}: not a valid manifest: {exc}") from None
    for name in REQUIRED:
        if name not in manifest.files:
            raise BackupRefused(f"{name}: missing from the backup")
    for name, expected in sorted(manifest.files.items()):
        path = root / name
        if ".." in PurePosixPath(name).parts or PurePosixPath(name).is_absolute():
            raise BackupRefused(f"{name}: not a path inside the backup")
        try:
            actual = sha256_file(path)
        except OSError:
            raise BackupRefused(f"{name}: missing from the backup") from None
        if actual != expected.lower():
            raise BackupRefused(f"{name}: sha256 differs from the manifest")
    return manifest
