"""A brute-force reference model of the lock core, written from
docs/contracts.md#locks alone.

No indexes, no incremental bookkeeping: every blocker set, fairness check and wait-for graph
is recomputed from scratch by scanning all owners and all queued requests, and the queue is
re-scanned from the top after every grant.  Slow, obviously right, and independent of
wconfd.locking's data structures: the property tests run both side by side.

The same brute-force functions are applied to snapshots of the real manager to check its
invariants (conflict-freeness, every pending request blocked, acyclic wait-for graph).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from client.errors import DeadlockError, InvalidParams, LockOrderError, PendingRequestError

LEVELS = ["cluster", "instance", "nodegroup", "node", "node-res", "network"]
S, X, R = "shared", "exclusive", "release"
STRENGTH = {None: 0, S: 1, X: 2}
INF = float("inf")


def key(name: str) -> tuple[int, int, str]:
    """(level index, 0 lockset / 1 member, name): the total order of lock names."""
    level, member = name.split("/", 1)
    return (LEVELS.index(level), 0 if member == "[lockset]" else 1, member)


def is_set(name: str) -> bool:
    return name.endswith("/[lockset]")


def lockset_of(name: str) -> str:
    return name.split("/", 1)[0] + "/[lockset]"


def conflict(a: str, ma: str, b: str, mb: str) -> bool:
    """Lock conflicts between two different owners."""
    if X not in (ma, mb):
        return False
    if a == b:
        return True
    return a.split("/", 1)[0] == b.split("/", 1)[0] and is_set(a) != is_set(b)


def wants_of(holdings: dict[str, str], pairs: dict[str, str]) -> list[tuple[str, str]]:
    """Pairs that strengthen `holdings`."""
    return [
        (lk, m) for lk, m in pairs.items() if m != R and STRENGTH[m] > STRENGTH[holdings.get(lk)]
    ]


def lock_blockers(
    held: dict[str, dict[str, str]], owner: str, wants: list[tuple[str, str]]
) -> set[str]:
    return {
        o
        for o, hs in held.items()
        if o != owner
        for l2, m2 in hs.items()
        for lk, m in wants
        if conflict(lk, m, l2, m2)
    }


def blocked_by(held: dict[str, dict[str, str]], other: str, wants: list[tuple[str, str]]) -> bool:
    return any(conflict(lk, m, l2, m2) for l2, m2 in held.get(other, {}).items() for lk, m in wants)


@dataclass
class Req:
    owner: str
    pairs: dict[str, str]
    prio: int
    seq: int
    since: Any = None


@dataclass
class Opp:
    owner: str
    pairs: dict[str, str]
    usable: dict[str, str]
    min_count: int
    prio: int
    seq: int
    since: Any = None


def fair_blockers(
    held: dict[str, dict[str, str]],
    queue: list[Req],
    owner: str,
    wants: list[tuple[str, str]],
    rank: tuple[float, float],
) -> set[str]:
    """Rule 5, by scanning the whole queue."""
    out = set()
    for r in queue:
        if r.owner == owner or (r.prio, r.seq) >= rank:
            continue
        rw = wants_of(held.get(r.owner, {}), r.pairs)
        if any(conflict(lk, m, l2, m2) for lk, m in wants for l2, m2 in rw) and not blocked_by(
            held, owner, rw
        ):
            out.add(r.owner)
    return out


def graph(held: dict[str, dict[str, str]], queue: list[Req]) -> dict[str, set[str]]:
    """Rule 6's wait-for graph."""
    g = {}
    for r in queue:
        w = wants_of(held.get(r.owner, {}), r.pairs)
        g[r.owner] = lock_blockers(held, r.owner, w) | fair_blockers(
            held, queue, r.owner, w, (r.prio, r.seq)
        )
    return g


def has_cycle(g: dict[str, set[str]]) -> bool:
    """Any cycle anywhere in `g` (three-colour DFS)."""
    colour: dict[str, int] = {}

    def visit(n: str) -> bool:
        colour[n] = 1
        for m in g.get(n, ()):
            c = colour.get(m, 0)
            if c == 1 or (c == 0 and visit(m)):
                return True
        colour[n] = 2
        return False

    return any(colour.get(n, 0) == 0 and visit(n) for n in list(g))


def conflict_free(held: dict[str, dict[str, str]]) -> bool:
    owners = list(held)
    for i, a in enumerate(owners):
        for b in owners[i + 1 :]:
            for la, ma in held[a].items():
                for lb, mb in held[b].items():
                    if conflict(la, ma, lb, mb):
                        return False
    return True


@dataclass
class Model:
    held: dict[str, dict[str, str]] = field(default_factory=dict)
    queue: list[Req] = field(default_factory=list)
    opp: dict[str, Opp] = field(default_factory=dict)
    seq: int = 0

    # -- helpers ---------------------------------------------------------------------------

    def parse(self, request: list[list[str]], allow_release: bool = True) -> dict[str, str]:
        out: dict[str, str] = {}
        for name, mode in request:
            if mode not in (S, X, R) or (mode == R and not allow_release):
                raise InvalidParams(mode)
            if name in out and out[name] != mode:
                raise InvalidParams(name)
            out[name] = mode
        return out

    def has_pending(self, owner: str) -> bool:
        return owner in self.opp or any(r.owner == owner for r in self.queue)

    def order_ok(self, owner: str, lk: str, m: str) -> bool:
        mine = self.held.get(owner, {})
        if not mine:
            return True
        top = max(mine, key=key)
        cur = mine.get(lk)
        if STRENGTH[cur] >= STRENGTH[m]:
            return True
        if not is_set(lk):
            ls = mine.get(lockset_of(lk))
            if m == X and ls == S:
                return False
            if ls is not None:
                return True
        return not key(lk) < key(top)

    def apply(self, owner: str, pairs: dict[str, str]) -> None:
        mine = self.held.setdefault(owner, {})
        for lk, m in pairs.items():
            if m == R:
                mine.pop(lk, None)
            else:
                mine[lk] = m
        if not mine:
            del self.held[owner]

    def blockers(
        self, owner: str, wants: list[tuple[str, str]], rank: tuple[float, float]
    ) -> set[str]:
        return lock_blockers(self.held, owner, wants) | fair_blockers(
            self.held, self.queue, owner, wants, rank
        )

    def req_of(self, owner: str) -> Req | None:
        return next((r for r in self.queue if r.owner == owner), None)

    def settle(self, granted: list[str], oppdone: dict[str, list[str]]) -> None:
        while True:
            for r in sorted(self.queue, key=lambda r: (r.prio, r.seq)):
                w = wants_of(self.held.get(r.owner, {}), r.pairs)
                if not self.blockers(r.owner, w, (r.prio, r.seq)):
                    self.queue.remove(r)
                    self.apply(r.owner, r.pairs)
                    granted.append(r.owner)
                    break
            else:
                break
        for o in sorted(self.opp, key=lambda o: self.opp[o].seq):
            if self.opp_step(self.opp[o]):
                oppdone[o] = self.opp_result(self.opp.pop(o))

    def held_count(self, ow: Opp) -> int:
        mine = self.held.get(ow.owner, {})
        return sum(1 for lk, m in ow.pairs.items() if STRENGTH[mine.get(lk)] >= STRENGTH[m])

    def opp_result(self, ow: Opp) -> list[str]:
        mine = self.held.get(ow.owner, {})
        got = sorted(
            (lk for lk, m in ow.pairs.items() if STRENGTH[mine.get(lk)] >= STRENGTH[m]), key=key
        )
        return got if len(got) >= ow.min_count else []

    def opp_step(self, ow: Opp) -> bool:
        mine = self.held.get(ow.owner, {})
        missing = [(lk, m) for lk, m in ow.usable.items() if STRENGTH[mine.get(lk)] < STRENGTH[m]]
        if not missing:
            return True
        have = self.held_count(ow)
        if ow.min_count and have + len(missing) < ow.min_count:
            return True
        free = [p for p in missing if not self.blockers(ow.owner, [p], (ow.prio, INF))]
        if not free or (ow.min_count and have + len(free) < ow.min_count):
            return False
        self.apply(ow.owner, dict(free))
        return len(free) == len(missing)

    # -- operations: each returns a comparable outcome ----------------------------------------

    def try_update(self, owner: str, request: list[list[str]], prio: int = 0) -> tuple[Any, ...]:
        return self._update(owner, request, prio, wait=False)

    def update_waiting(
        self, owner: str, request: list[list[str]], prio: int = 0
    ) -> tuple[Any, ...]:
        return self._update(owner, request, prio, wait=True)

    def _update(
        self, owner: str, request: list[list[str]], prio: int, wait: bool
    ) -> tuple[Any, ...]:
        pairs = self.parse(request)
        if self.has_pending(owner):
            raise PendingRequestError(owner)
        for lk, m in pairs.items():
            if m != R and not self.order_ok(owner, lk, m):
                raise LockOrderError(lk)
        w = wants_of(self.held.get(owner, {}), pairs)
        found = self.blockers(owner, w, (prio, INF))
        if found:
            if not wait:
                return ("update", False, False, sorted(found), [], {}, {})
            self.queue.append(Req(owner, pairs, prio, self.seq + 1))
            if has_cycle(graph(self.held, self.queue)):
                self.queue.pop()
                raise DeadlockError(owner)
            self.seq += 1
            return ("update", False, True, sorted(found), [], {}, {})
        self.apply(owner, pairs)
        granted: list[str] = []
        oppdone: dict[str, list[str]] = {}
        self.settle(granted, oppdone)
        return ("update", True, False, [], granted, {}, oppdone)

    def withdraw(self, owner: str) -> tuple[Any, ...]:
        r = self.req_of(owner)
        granted: list[str] = []
        oppdone: dict[str, list[str]] = {}
        if r is not None:
            w = wants_of(self.held.get(owner, {}), r.pairs)
            found = sorted(self.blockers(owner, w, (r.prio, r.seq)))
            self.queue.remove(r)
            self.settle(granted, oppdone)
            return ("update", False, False, found, granted, {}, oppdone)
        if owner in self.opp:
            ow = self.opp[owner]
            mine = self.held.get(owner, {})
            missing = [
                (lk, m) for lk, m in ow.usable.items() if STRENGTH[mine.get(lk)] < STRENGTH[m]
            ]
            found = sorted(self.blockers(owner, missing, (ow.prio, INF)))
            del self.opp[owner]
            return ("update", False, False, found, [], {}, {})
        return ("update", False, False, [], [], {}, {})

    def _owner_change(self, owner: str, change: Any) -> tuple[Any, ...]:
        withdrawn = {}
        r = self.req_of(owner)
        if r is not None:
            w = wants_of(self.held.get(owner, {}), r.pairs)
            withdrawn[owner] = sorted(self.blockers(owner, w, (r.prio, r.seq)))
            self.queue.remove(r)
        ow = self.opp.pop(owner, None)
        mine = self.held.get(owner, {})
        new = change(dict(mine))
        if new:
            self.held[owner] = new
        else:
            self.held.pop(owner, None)
        granted: list[str] = []
        oppdone: dict[str, list[str]] = {}
        self.settle(granted, oppdone)
        if ow is not None:
            oppdone[owner] = self.opp_result(ow)
        return ("effects", granted, withdrawn, oppdone)

    def free_locks(self, owner: str) -> tuple[Any, ...]:
        return self._owner_change(owner, lambda mine: {})

    def free_locks_level(self, owner: str, level: str) -> tuple[Any, ...]:
        if level not in LEVELS:
            raise InvalidParams(level)
        return self._owner_change(
            owner, lambda mine: {lk: m for lk, m in mine.items() if lk.split("/")[0] != level}
        )

    def downgrade_locks_level(self, owner: str, level: str) -> tuple[Any, ...]:
        if level not in LEVELS:
            raise InvalidParams(level)
        return self._owner_change(
            owner,
            lambda mine: {lk: (S if lk.split("/")[0] == level else m) for lk, m in mine.items()},
        )

    def intersect_locks(self, owner: str, locks: list[str]) -> tuple[Any, ...]:
        keep = set(locks)
        return self._owner_change(
            owner, lambda mine: {lk: m for lk, m in mine.items() if lk in keep}
        )

    def remove_owner(self, owner: str) -> tuple[Any, ...]:
        return self.free_locks(owner)

    def opportunistic(
        self, owner: str, request: list[list[str]], min_count: int, prio: int, wait: bool
    ) -> tuple[Any, ...]:
        pairs = self.parse(request, allow_release=False)
        if self.has_pending(owner):
            raise PendingRequestError(owner)
        usable = {lk: m for lk, m in pairs.items() if self.order_ok(owner, lk, m)}
        ow = Opp(owner, pairs, usable, min_count, prio, self.seq + 1)
        done = self.opp_step(ow)
        if wait and not done:
            self.seq += 1
            self.opp[owner] = ow
            return ("opp", self.opp_result(ow), True)
        return ("opp", self.opp_result(ow), False)

    def finish_opportunistic(self, owner: str) -> tuple[Any, ...]:
        ow = self.opp.pop(owner, None)
        return ("opp", self.opp_result(ow) if ow else [], False)

    def set_priority(self, owner: str, prio: int) -> tuple[Any, ...]:
        r = self.req_of(owner)
        granted: list[str] = []
        oppdone: dict[str, list[str]] = {}
        if r is None:
            if owner in self.opp:
                self.opp[owner].prio = prio
                self.settle(granted, oppdone)
            return ("effects", granted, {}, oppdone)
        old, r.prio = r.prio, prio
        if has_cycle(graph(self.held, self.queue)):
            r.prio = old
            raise DeadlockError(owner)
        self.settle(granted, oppdone)
        return ("effects", granted, {}, oppdone)

    # -- views ---------------------------------------------------------------------------

    def held_view(self) -> dict[str, list[list[str]]]:
        return {
            o: [[lk, self.held[o][lk]] for lk in sorted(self.held[o], key=key)]
            for o in sorted(self.held)
        }

    def pending_view(self) -> list[tuple[str, int, list[list[str]]]]:
        waits: list[Req | Opp] = [*self.queue, *self.opp.values()]
        waits.sort(key=lambda r: (r.prio, r.seq))
        return [
            (r.owner, r.prio, [[lk, r.pairs[lk]] for lk in sorted(r.pairs, key=key)]) for r in waits
        ]
