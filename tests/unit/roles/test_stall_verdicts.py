"""The pure verdicts of stalls (docs/operations.md#stalls): what luxid's silence means to its
wconfd (wconfd.luxid_watch.luxid_verdict) and what wconfd's role answer means to its luxid
(luxid.wconfd_role.judge)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from client.api.common import RoleInfo
from luxid.wconfd_role import FRESH, Agreement, judge
from wconfd.luxid_watch import HUNG_AFTER, Verdict, luxid_verdict

silences = st.floats(0, 60, allow_nan=False)


@given(silences, silences)
def test_luxid_silence_only_grows_worse(a: float, b: float) -> None:
    order = [Verdict.ANSWERS, Verdict.SILENT, Verdict.HUNG]
    short, long = sorted((a, b))
    assert order.index(luxid_verdict(0.0, short)) <= order.index(luxid_verdict(0.0, long))
    assert (luxid_verdict(0.0, long) is Verdict.HUNG) == (long >= HUNG_AFTER)


def test_a_luxid_that_just_answered_answers() -> None:
    assert luxid_verdict(10.0, 10.0) is Verdict.ANSWERS
    assert luxid_verdict(10.0, 14.0) is Verdict.SILENT  # a standby waits before campaigning
    assert luxid_verdict(10.0, 10.0 + HUNG_AFTER) is Verdict.HUNG


roles = st.sampled_from(["master", "standby"])
names = st.sampled_from(["node1", "node2", None])
terms = st.integers(0, 5)


@given(roles, names, terms, st.floats(0, 5), terms)
def test_luxid_serves_only_a_term_its_wconfd_confirmed_lately(
    role: str, master: str | None, term: int, age: float, mine: int
) -> None:
    answer = RoleInfo(node="node1", role=role, master=master, term=term)
    verdict = judge(answer, 100.0, 100.0 + age, "node1", mine)
    if verdict is Agreement.CONFIRMED:
        assert role == "master" and age < FRESH
        assert term == 0 or (master == "node1" and term == mine)
    lagging = term < mine and master not in (None, "node1")
    if term and (master != "node1" or term != mine) and not lagging:
        assert verdict is Agreement.DEPOSED  # wconfd names another master or term: end now
    if term and lagging:
        assert verdict is not Agreement.CONFIRMED  # it has not seen the key yet
    if master == "node1" and term == mine and term and role == "standby":
        assert verdict is Agreement.DOUBT  # loading or proving its lease: wait, keep jobs


def test_no_answer_is_doubt_not_deposed() -> None:
    assert judge(None, 0.0, 50.0, "node1", 3) is Agreement.DOUBT
    stale = RoleInfo(node="node1", role="master", master="node1", term=3)
    assert judge(stale, 0.0, FRESH, "node1", 3) is Agreement.DOUBT
    assert judge(stale, 0.0, FRESH / 2, "node1", 3) is Agreement.CONFIRMED
