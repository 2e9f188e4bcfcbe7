"""The decisions of leader election, as pure functions over plain data.

The master holds the leader key through an etcd lease of `ttl` seconds. etcd counts the
lease from when it *receives* a grant or keepalive, which is after the master *sent* it;
so, judged on the master's own monotonic clock, the lease cannot lapse before
`sent + ttl` of the last request that etcd answered with a live lease. That instant is the
master's deadline: past it another node may hold the key, and the master must already
have stopped serving. It renews every ttl/3, and retries a failed renewal every ttl/10
until the deadline.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    """One node's tenure as master: the lease that holds the key and the fencing token.

    `token` is the leader key's create revision: it grows with every new master, so it is
    also the term number that `get_role` reports.
    """

    node: str
    lease_id: int
    token: int


@dataclass(frozen=True)
class Renewal:
    """What the master knows of its lease: when the last successful renewal was sent."""

    sent_at: float
    ttl: float

    @property
    def deadline(self) -> float:
        """When the lease could have lapsed in etcd: the master must have stepped down."""
        return self.sent_at + self.ttl

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
