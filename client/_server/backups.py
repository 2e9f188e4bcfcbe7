"""Where a daemon's `backup` writes (docs/contracts.md#backups-and-store-copy): only
below `<state dir>/backups/`, so no client can make a daemon write anywhere else.

Shared by wconfd and luxid: each writes its part's files into the folder `prepare` gives,
then answers `hashes` of them.  `dir` was checked at the edge (client.api.common.check_backup_dir);
`prepare` checks again that the folder, with every symlink resolved, stays inside.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from client.backup import BACKUPS, check_backup_dir, fsync_dir, sha256_file
from client.errors import InvalidParams


def prepare(state_dir: Path, dir: str) -> Path:
    """An empty `<state_dir>/backups/<dir>/` (what was there is removed), absolute.
    InvalidParams naming `dir` if it would lead outside `backups/`."""
    check_backup_dir(dir)
    root = (state_dir / BACKUPS).resolve()
    target = (root / dir).resolve()
    if target == root or root not in target.parents:
        raise InvalidParams(
            f"backup: param `dir` leads outside {root} (through a symlink?)", {"param": "dir"}
        )
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    return target


def hashes(folder: Path, names: list[str]) -> dict[str, str]:
    """{name: sha256} of the files written into `folder`, once the folder's entries are
    durable."""
    fsync_dir(folder)
    return {name: sha256_file(folder / name) for name in sorted(names)}
