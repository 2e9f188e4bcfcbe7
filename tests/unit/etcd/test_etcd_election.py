"""The pure decisions of leader election (client._server.etcd.election): properties.

The safety property (docs/contracts.md#through-stalls): a master believes itself master only while
etcd cannot yet have let its lease lapse. Simulated: keepalives sent at random times, received by
etcd after random delays (or lost), answered after more delay, granted a TTL at least the one asked;
at every instant the master's deadline is no later than etcd's expiry of the lease.
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client._server.etcd.election import (
    Renewal,
    after_keepalive,
    attempt_timeout,
    must_step_down,
    next_wake,
    proof_time,
    safety_margin,
)

TTL = 3.0
delay = st.floats(0.0, 2.0, allow_nan=False)


@given(
    st.floats(0.0, 1.0),  # when the grant request was sent
    delay,  # until etcd granted the lease
    st.lists(
        st.tuples(st.floats(0.0, 2.5), delay, delay, st.booleans(), st.integers(3, 6)),
        max_size=12,
    ),  # (gap before sending, delay to etcd, delay back, answer lost?, TTL etcd grants)
)
def test_the_master_never_outlives_its_lease_in_etcd(
    grant_sent: float, grant_delay: float, keepalives: list[tuple[float, float, float, bool, int]]
) -> None:
    renewal = Renewal(sent_at=grant_sent, ttl=TTL)
    server_expiry = grant_sent + grant_delay + TTL
    sent = grant_sent
    for gap, to_etcd, back, lost, granted in keepalives:
        sent += gap
        received = sent + to_etcd
        if received >= server_expiry:
            break  # the lease lapsed in etcd: a keepalive now answers TTL 0
        server_expiry = received + granted
        if lost:
            continue
        answered = received + back
        assert renewal.deadline <= server_expiry
        if must_step_down(renewal, answered):
            break  # the master already stepped down before this answer came
        updated = after_keepalive(renewal, sent, granted, TTL)
        assert updated is not None and updated.deadline >= renewal.deadline
        renewal = updated
        assert renewal.deadline <= server_expiry


def test_a_lapsed_lease_means_stepping_down() -> None:
    assert after_keepalive(Renewal(0.0, TTL), 1.0, 0, TTL) is None
    margin = safety_margin(TTL)
    assert 0 < margin < TTL / 3
    assert not must_step_down(Renewal(10.0, TTL), 12.99 - margin)
    assert must_step_down(Renewal(10.0, TTL), 13.0 - margin)


@given(st.floats(0.5, 60), st.integers(1, 7))
def test_a_renewal_asks_every_member_more_than_once_within_the_ttl(
    ttl: float, members: int
) -> None:
    attempt = attempt_timeout(ttl, members)
    if attempt > 0.2:  # the floor: a loaded member still gets to answer
        assert 2 * members * attempt < ttl - safety_margin(ttl)
    assert proof_time(ttl) <= ttl


@given(st.floats(0, 100), st.floats(0, 10), st.booleans())
def test_the_master_wakes_on_schedule_and_never_after_its_deadline(
    sent: float, elapsed: float, failed: bool
) -> None:
    renewal = Renewal(sent, TTL)
    now = sent + elapsed
    wake = next_wake(renewal, now, failed)
    assert wake <= renewal.deadline
    if now <= renewal.deadline:
        assert wake >= now
        expected = now + TTL / 10 if failed else renewal.renew_at
        assert wake == min(max(expected, now), renewal.deadline)


def test_etcd_granting_more_than_asked_does_not_lengthen_the_masters_deadline() -> None:
    renewed = after_keepalive(Renewal(0.0, TTL), 1.0, 10, TTL)
    assert renewed == Renewal(1.0, TTL)
