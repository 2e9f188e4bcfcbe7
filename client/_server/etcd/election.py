"""The decisions of leader election, as pure functions over plain data.

The master holds the leader key through an etcd lease of `ttl` seconds. etcd counts the
lease from when it *receives* a grant or keepalive, which is after the master *sent* it;
so, judged on the master's own monotonic clock, the lease cannot lapse before
`sent + ttl` of the last request that etcd answered with a live lease. That instant is the
master's deadline, less a safety margin (the two clocks may run at slightly different
rates): past it another node may hold the key, and the master must already have stopped
serving. It renews every ttl/3, and retries a failed renewal every ttl/10 until the
deadline, each renewal trying the members in turn with attempts short enough that every
member is asked more than once within the TTL (`attempt_timeout`): one member that hangs
(a stalled etcd leader) then costs a renewal a fraction of the TTL, not all of it.

Past the deadline by its own clock the master has not necessarily lost its lease: a
stalled master (SIGSTOP, a long pause) asks etcd for up to `proof_time`, and is master again
only if etcd says the lease is alive. A master that gives up revokes its lease so that a
standby can take the key at once.
"""

from __future__ import annotations

from dataclasses import dataclass

DEFAULT_TTL = 3.0
"""The leader lease's TTL in seconds unless `--lease-ttl` says otherwise (here, with the
election's pure rules, so the daemons' option parser needs no etcd client to show it)."""


@dataclass(frozen=True)
class Term:
    """One node's tenure as master: the lease that holds the key and the fencing token.

    `token` is the leader key's create revision: it grows with every new master, so it is
    also the term number that `get_role` reports.
    """

    node: str
    lease_id: int
    token: int


def safety_margin(ttl: float) -> float:
    """How much earlier than etcd could the master take its lease to be lapsed."""
    return min(0.5, ttl / 10)


def attempt_timeout(ttl: float, members: int) -> float:
    """One renewal attempt's limit on one member: every member is asked more than once
    within the TTL (but never less than 0.2 s: a loaded member still gets to answer)."""
    return max(0.2, min(1.0, (ttl - safety_margin(ttl)) / (2 * max(1, members) + 1)))


def proof_time(ttl: float) -> float:
    """How long a master past its own deadline asks etcd whether its lease lives: one more
    TTL, since etcd itself may be electing a leader (a stalled etcd leader takes 1 to 3 s
    to replace; the new leader extends every lease). The master serves nothing meanwhile,
    and a lease that lapsed is answered at once (TTL 0)."""
    return ttl


@dataclass(frozen=True)
class Renewal:
    """What the master knows of its lease: when the last successful renewal was sent."""

    sent_at: float
    ttl: float

    @property
    def deadline(self) -> float:
        """When the lease could have lapsed in etcd (less the safety margin): the master
        must have stopped serving."""
        return self.sent_at + self.ttl - safety_margin(self.ttl)

    @property
    def renew_at(self) -> float:
        """When to send the next keepalive."""
        return self.sent_at + self.ttl / 3


def must_step_down(renewal: Renewal, now: float) -> bool:
    """Whether the lease could have lapsed by `now` (monotonic)."""
    return now >= renewal.deadline


def after_keepalive(
    renewal: Renewal, sent_at: float, remaining_ttl: int, requested_ttl: float
) -> Renewal | None:
    """The renewal after a keepalive sent at `sent_at` came back with `remaining_ttl`.

    None when etcd says the lease is gone (TTL 0): the master steps down. etcd may grant
    more than asked (its minimum TTL); the master still judges by the smaller of the two.
    """
    if remaining_ttl <= 0:
        return None
    return Renewal(
        sent_at=max(renewal.sent_at, sent_at), ttl=min(float(remaining_ttl), requested_ttl)
    )


def next_wake(renewal: Renewal, now: float, last_failed: bool) -> float:
    """When the master acts next: renew on schedule, or retry soon after a failure.

    Never later than the deadline, so the step-down happens on time.
    """
    target = now + renewal.ttl / 10 if last_failed else renewal.renew_at
    return min(max(target, now), renewal.deadline)
