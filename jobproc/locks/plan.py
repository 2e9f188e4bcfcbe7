"""Lock plans: which wconfd locks an opcode needs, phase by phase
(docs/contracts.md#job-processes-and-opcodes).

A `LockPlan` is what an opcode's ``locks(params, config)`` returns.  It names the mode of
the Big Ganeti Lock explicitly (`bgl`) and a sequence of phases.  A phase is either a
fixed `LockPhase` or a *resolver*: a function of the configuration that computes the
phase once the earlier phases are held (so what it reads is protected by those locks —
e.g. an instance's nodes are read only after ``instance/<name>`` is held).

How the job process acquires a plan (Ganeti's mcpu order: the BGL first, then the levels):

    for i in range(len(plan)):
        phase = plan.phase(i, config)        # phase 0 starts with ["cluster/BGL", plan.bgl]
        if phase.release:                    # never blocks: try_update_locks
            try_update_locks(phase.release_request())
        if phase.acquire:                    # may block: update_locks_waiting with the
            update_locks_waiting(phase.acquire_request(), priority, timeout)  # strategy
    # on a timeout in any phase: free_locks() and start again from phase 0 (a fresh
    # ``locks()`` call), with the next timeout of jobproc.locks.strategy.

Releases are a request of their own because wconfd forbids asking for a member
exclusively while holding its level's lockset shared, even in the same request.
A resolver may raise `OpExecError` (e.g. "instance not found"): the opcode then fails.

Pure module: no I/O; the lock names and order (docs/contracts.md#lock-names-and-order) are
client.vocabulary's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from client.vocabulary import (
    BGL,
    EXCLUSIVE,
    SHARED,
    lock_key,
    lock_name,
    lockset_name,
)
from client.vocabulary import Mode as LockMode

if TYPE_CHECKING:
    from jobproc.opcodes.context import ConfigReader

lock = lock_name  # the builders opcodes call: lock("node", "n1"), lockset("node")
lockset = lockset_name
lock_sort_key = lock_key


def _stronger(a: LockMode, b: LockMode) -> LockMode:
    return EXCLUSIVE if EXCLUSIVE in (a, b) else SHARED


@dataclass(frozen=True)
class LockPhase:
    """One step of a plan: locks to release (first), then locks to acquire.

    Build it with `LockPhase.of`, which merges duplicate locks (the stronger mode wins,
    since wconfd refuses two different pairs for one lock) and sorts by lock order.
    """

    acquire: tuple[tuple[str, LockMode], ...] = ()
    release: tuple[str, ...] = ()

    @classmethod
    def of(
        cls, acquire: Iterable[tuple[str, LockMode]] = (), release: Iterable[str] = ()
    ) -> LockPhase:
        """A phase from (lock, mode) pairs and lock names, merged and in lock order."""
        merged: dict[str, LockMode] = {}
        for name, mode in acquire:
            lock_sort_key(name)  # validates the level
            if mode not in (SHARED, EXCLUSIVE):
                raise ValueError(f"bad lock mode {mode!r} for {name}")
            merged[name] = _stronger(merged[name], mode) if name in merged else mode
        rel = sorted(set(release), key=lock_sort_key)
        both = merged.keys() & set(rel)
        if both:
            raise ValueError(f"locks both released and acquired in one phase: {sorted(both)}")
        pairs = tuple(sorted(merged.items(), key=lambda kv: lock_sort_key(kv[0])))
        return cls(acquire=pairs, release=tuple(rel))

    def acquire_request(self) -> list[list[str]]:
        """The ``update_locks_waiting`` request: ``[[lock, mode], ...]``."""
        return [[name, mode] for name, mode in self.acquire]

    def release_request(self) -> list[list[str]]:
        """The ``try_update_locks`` request releasing this phase's `release` locks."""
        return [[name, "release"] for name in self.release]

    def locks(self) -> dict[str, LockMode]:
        """The acquired locks as a mapping lock → mode."""
        return dict(self.acquire)


PhaseResolver = Callable[["ConfigReader"], LockPhase]
PhaseSpec = LockPhase | PhaseResolver


@dataclass(frozen=True)
class LockPlan:
    """Everything an opcode must hold before `execute`: the BGL mode and the phases.

    `bgl` is "shared" unless the opcode changes the cluster object
    (docs/contracts.md#job-processes-and-opcodes: the job process takes cluster/BGL shared
    first unless the opcode needs it exclusive); it is put at the head of phase 0 by
    `phase`.  Opcodes must not name cluster/BGL themselves.
    """

    bgl: LockMode = SHARED
    phases: tuple[PhaseSpec, ...] = field(default_factory=tuple)

    def __post_init__(self) -> None:
        if self.bgl not in (SHARED, EXCLUSIVE):
            raise ValueError(f"bad BGL mode {self.bgl!r}")
        for spec in self.phases:
            if isinstance(spec, LockPhase) and (BGL in spec.locks() or BGL in spec.release):
                raise ValueError("name the BGL through LockPlan.bgl, not in a phase")

    @classmethod
    def single(
        cls, acquire: Iterable[tuple[str, LockMode]] = (), bgl: LockMode = SHARED
    ) -> LockPlan:
        """A one-phase plan with fixed locks (most opcodes)."""
        return cls(bgl=bgl, phases=(LockPhase.of(acquire),))

    def __len__(self) -> int:
        """Number of phases (at least 1: phase 0 always holds the BGL)."""
        return max(1, len(self.phases))

    def phase(self, index: int, config: ConfigReader) -> LockPhase:
        """Phase `index`, resolved against `config`; phase 0 begins with the BGL.

        Call it for phase i only when phases 0..i-1 are held: a resolver reads the
        configuration that those locks protect.
        """
        if not 0 <= index < len(self):
            raise IndexError(f"lock plan has {len(self)} phases, not {index + 1}")
        spec: PhaseSpec = self.phases[index] if self.phases else LockPhase()
        ph = spec if isinstance(spec, LockPhase) else spec(config)
        if BGL in ph.locks() or BGL in ph.release:
            raise ValueError("name the BGL through LockPlan.bgl, not in a phase")
        if index == 0:
            return LockPhase(acquire=((BGL, self.bgl), *ph.acquire), release=ph.release)
        return ph
