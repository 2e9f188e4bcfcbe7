"""wconfd's pure lock core (docs/contracts.md#locks): names and order, the allocation,
waiting requests.

No I/O, clocks or threads: the daemon shell calls `LockManager` methods and acts on the
returned `Effects` (answer granted waiters, journal changed holdings).
"""

from client.vocabulary import BGL, EXCLUSIVE, LEVELS, LOCKSET, RELEASE, SHARED

from .effects import Effects, Opportunistic, Update
from .manager import LockManager
from .names import (
    Lock,
    conflicts,
    lock_key,
    parse_lock,
    parse_request,
    sort_locks,
)
from .table import Allocation, RestoreError

__all__ = [
    "BGL",
    "EXCLUSIVE",
    "LEVELS",
    "LOCKSET",
    "RELEASE",
    "SHARED",
    "Allocation",
    "Effects",
    "Lock",
    "LockManager",
    "Opportunistic",
    "RestoreError",
    "Update",
    "conflicts",
    "lock_key",
    "parse_lock",
    "parse_request",
    "sort_locks",
]
