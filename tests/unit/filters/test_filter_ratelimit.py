"""Reason-trail buckets (Ganeti's JQScheduler), RATE_LIMIT slot counting, and the per-pass
Admission bookkeeping with its pending_reason texts (docs/contracts.md#job-model)."""

from __future__ import annotations

from collections import Counter

import pytest
from filters_testlib import job, rule, select, uid, verdicts

from luxid.filters import (
    Admission,
    FilterChain,
    Verdict,
    bucket_full_reason,
    bucket_limit,
    bucket_of,
    buckets_of,
    count_buckets,
    count_rate_limit_rules,
    full_bucket,
    parse_reason_rate_limit,
    paused_reason,
    rate_limit_allows,
    rate_limited_reason,
    rejected_result,
)


@pytest.mark.parametrize(
    ("text", "parsed"),
    [
        ("rate-limit:7:operation pink bunny", ("7:operation pink bunny", 7)),
        ("rate-limit:3", ("3", 3)),  # no label
        ("rate-limit:3:", ("3:", 3)),
        ("rate-limit:2:a:b:c", ("2:a:b:c", 2)),  # the label keeps its colons
        ("rate-limit:07:x", ("07:x", 7)),  # the key is verbatim, the limit its value
        ("rate-limit:0:x", None),
        ("rate-limit:-1:x", None),
        ("rate-limit:+1:x", None),
        ("rate-limit: 3:x", None),  # no spaces
        ("rate-limit:3 :x", None),
        ("rate-limit:٣:x", None),  # ASCII digits only
        ("rate-limit::x", None),
        ("rate-limit", None),
        ("rate-limit:", None),
        ("Rate-limit:3:x", None),
        (" rate-limit:3:x", None),
        ("rate-limits:3:x", None),
        ("x rate-limit:3:x", None),
    ],
)
def test_parse(text: str, parsed: tuple[str, int] | None) -> None:
    assert parse_reason_rate_limit(text) == parsed
    assert bucket_of(text) == (parsed[0] if parsed else None)


def test_bucket_limit() -> None:
    assert bucket_limit("7:operation pink bunny") == 7
    assert bucket_limit("3") == 3
    assert bucket_limit("07:x") == 7


def test_buckets_of_reason_trails() -> None:
    trails = [
        [["s", "rate-limit:2:hello", 1], ["s", "plain", 2]],
        [["t", "rate-limit:2:hello", 3], ["t", "rate-limit:5:other", 4]],
        [],
        [["only"]],  # a malformed entry has no text: ignored
    ]
    assert buckets_of(trails) == {"2:hello", "5:other"}


def test_job_buckets_come_from_every_opcode() -> None:
    j = job(
        1,
        ops=[
            {"OP_ID": "A", "reason": [["s", "rate-limit:2:x", 1]]},
            {"OP_ID": "B", "reason": [["s", "rate-limit:3:y", 1], ["s", "rate-limit:2:x", 2]]},
        ],
    )
    assert j.buckets == {"2:x", "3:y"}


def test_full_bucket() -> None:
    assert full_bucket([], {"2:x": 10}) is None  # in no bucket: always passes
    assert full_bucket(["2:x"], {"2:x": 1}) is None
    assert full_bucket(["2:x"], {"2:x": 2}) == "2:x"
    assert full_bucket(["3:y", "2:x"], {"2:x": 2, "3:y": 3}) == "2:x"  # sorted: deterministic
    assert full_bucket(["3:y"], {"2:x": 9}) is None  # over-full elsewhere does not block


def test_counting() -> None:
    assert count_buckets([{"2:x"}, ["2:x", "2:x"], set()]) == Counter({"2:x": 2})
    verdicts = [
        Verdict("RATE_LIMIT", "u1", 2),
        Verdict("RATE_LIMIT", "u1", 2),
        Verdict("PAUSE", "u2"),
        None,
        Verdict("RATE_LIMIT", "u3", 1),
    ]
    assert count_rate_limit_rules(verdicts) == Counter({"u1": 2, "u3": 1})
    assert rate_limit_allows(Verdict("RATE_LIMIT", "u1", 2), {"u1": 1})
    assert not rate_limit_allows(Verdict("RATE_LIMIT", "u1", 2), {"u1": 2})
    assert rate_limit_allows(Verdict("ACCEPT", "u1"), {"u1": 99})
    assert rate_limit_allows(None, {})


def test_texts() -> None:
    assert paused_reason("U") == "paused by filter U"
    assert rate_limited_reason("U") == "rate-limited by filter U"
    assert bucket_full_reason("2:x") == "rate-limit bucket 2:x full"
    assert rejected_result("U") == "rejected by filter U"


# -- Admission --------------------------------------------------------------------------------

RL = Verdict("RATE_LIMIT", "rule-a", 2)


def test_admission_rate_limit() -> None:
    adm = Admission.from_running([(RL, ()), (None, ()), (Verdict("PAUSE", "p"), ())])
    assert adm.rules == Counter({"rule-a": 1})
    assert adm.try_start(RL, ()) is None
    assert adm.try_start(RL, ()) == "rate-limited by filter rule-a"
    assert adm.try_start(None, ()) is None
    assert adm.rules == Counter({"rule-a": 2})


def test_admission_pending_reasons_in_order() -> None:
    adm = Admission(buckets={"1:x": 1})
    assert adm.hold_reason(Verdict("PAUSE", "p"), ["1:x"]) == "paused by filter p"
    assert adm.hold_reason(Verdict("REJECT", "r"), []) == "rejected by filter r"
    assert adm.hold_reason(RL, ["1:x"]) == "rate-limit bucket 1:x full"
    assert adm.hold_reason(None, ["1:y"]) is None


def test_held_jobs_take_no_slot() -> None:
    """Beyond Ganeti (whose bucket stage runs before the filters): only starting jobs take
    slots, so a paused job or a job held by one limit does not eat the other's slot."""
    adm = Admission(rules={"rule-a": 2})  # the rule is full
    assert adm.try_start(RL, ["1:x"]) == "rate-limited by filter rule-a"
    assert adm.buckets["1:x"] == 0
    assert adm.try_start(Verdict("PAUSE", "p"), ["1:x"]) == "paused by filter p"
    assert adm.buckets["1:x"] == 0
    assert adm.try_start(None, ["1:x"]) is None
    assert adm.buckets["1:x"] == 1
    adm2 = Admission(buckets={"1:x": 1})
    assert adm2.try_start(Verdict("RATE_LIMIT", "rule-b", 5), ["1:x"]) is not None
    assert adm2.rules["rule-b"] == 0


def test_running_jobs_counted_with_the_current_chain() -> None:
    """A rule added while jobs run: they are not stopped, but count against the limit."""
    rename = ["opcode", ["==", "OP_ID", "OP_CLUSTER_RENAME"]]
    chain = FilterChain([rule(1, [rename], ["RATE_LIMIT", 2])])
    running = [job(1), job(2), job(3)]  # three already running: over the limit
    assert select(chain, [job(4), job(5)], running=running) == []
    assert select(chain, [job(4), job(5)], running=running[:1]) == [4]
    other = job(6, ops=[{"OP_ID": "OP_TEST_DELAY"}])
    assert select(chain, [job(4), other], running=running) == [6]
    assert count_rate_limit_rules(verdicts(chain, running)) == Counter({uid(1): 3})
