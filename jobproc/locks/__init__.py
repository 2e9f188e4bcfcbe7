"""An opcode's locks, one topic (docs/contracts.md#job-processes-and-opcodes):

- `jobproc.locks.plan` — what an opcode needs: `LockPlan`, its phases, lock names and
  order (pure; opcodes and luxid's opcode registry import it).
- `jobproc.locks.strategy` — Ganeti's lock-wait timeouts and priority escalation (pure).
- `jobproc.locks.acquire` — taking a plan through wconfd in a job process (I/O).

This package exports the plan vocabulary only, so that importing it stays as cheap as
the registry needs (no stub, no event loop):

    from jobproc.locks import EXCLUSIVE, LockPlan, lock
"""

from client.vocabulary import BGL, EXCLUSIVE, LEVELS, SHARED
from jobproc.locks.plan import LockMode, LockPhase, LockPlan, lock, lock_sort_key, lockset

__all__ = [
    "BGL",
    "EXCLUSIVE",
    "LEVELS",
    "SHARED",
    "LockMode",
    "LockPhase",
    "LockPlan",
    "lock",
    "lock_sort_key",
    "lockset",
]
