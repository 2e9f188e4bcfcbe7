"""The audit log's queries and numbering (client.audit, client.audit_table): SQLite answers
exactly what the contract's rule says (docs/contracts.md#audit-log: `since <= ts < until`,
actor and target equal, the newest `limit`, newest last), copies keep their seqs, and a
merge of several daemons' answers is ordered by time."""

from __future__ import annotations

import sqlite3

from hypothesis import given, settings
from hypothesis import strategies as st

from client import audit_table
from client.audit import AuditEntry, Query, merged, number_entries

ACTORS = st.sampled_from(["cli:alice", "rapi:bob", "job:7", "uid:0"])
TARGETS = st.sampled_from(["job/1", "queue", "instance/web1", "node/n1"])
TIMES = st.integers(0, 50).map(float)


def entry(ts: float, actor: str, target: str, seq: int = 0) -> AuditEntry:
    return AuditEntry(seq, ts, "luxid", actor, 0, 1, None, "submit_job", target, "ok")


ENTRIES = st.lists(st.builds(entry, TIMES, ACTORS, TARGETS), max_size=40).map(
    lambda found: sorted(found, key=lambda e: e.ts)  # a daemon numbers entries as time goes
)
QUERIES = st.builds(
    Query,
    since=st.none() | TIMES,
    until=st.none() | TIMES,
    actor=st.none() | ACTORS,
    target=st.none() | TARGETS,
    limit=st.integers(0, 50),
)


def reference(entries: list[AuditEntry], query: Query) -> list[AuditEntry]:
    """The rule as written: every matching entry in seq order, the newest `limit`."""
    found = [e for e in entries if query.matches(e)]
    return found[max(0, len(found) - query.limit) :] if query.limit else []


@settings(max_examples=200, deadline=None)
@given(ENTRIES, QUERIES)
def test_select_answers_what_the_rule_says(entries: list[AuditEntry], query: Query) -> None:
    numbered = number_entries(entries, 0)
    db = sqlite3.connect(":memory:")
    audit_table.create(db)
    audit_table.insert(db, numbered)
    assert audit_table.select(db, query) == reference(numbered, query)
    assert audit_table.last_seq(db) == len(entries)


@given(ENTRIES, st.integers(0, 1000))
def test_numbering_goes_on_from_the_last_and_copies_keep_their_seqs(
    entries: list[AuditEntry], last: int
) -> None:
    numbered = number_entries(entries, last)
    assert [e.seq for e in numbered] == list(range(last + 1, last + 1 + len(entries)))
    assert number_entries(numbered, 5_000) == numbered  # a copy's entries keep theirs


@given(st.lists(ENTRIES, max_size=3), st.integers(0, 60))
def test_a_merge_is_by_time_and_keeps_the_newest(parts: list[list[AuditEntry]], limit: int) -> None:
    numbered = [number_entries(part, 0) for part in parts]
    found = merged(numbered, limit)
    everything = [e for part in numbered for e in part]
    assert [e.ts for e in found] == sorted(e.ts for e in found)
    assert len(found) == min(limit, len(everything))
    if found:
        assert all(e.ts <= found[0].ts for e in everything if e not in found)


def test_retention_keeps_the_newest_count_and_drops_the_old() -> None:
    db = sqlite3.connect(":memory:")
    audit_table.create(db)
    audit_table.insert(
        db, number_entries([entry(float(t), "cli:a", "queue") for t in range(10)], 0)
    )
    assert audit_table.prune(db, now=86_400.0 + 5, days=1.0, count=8) == 5  # ts < 5, seq <= 2
    assert [e.seq for e in audit_table.select(db, Query())] == [6, 7, 8, 9, 10]


@given(
    st.lists(st.integers(0, 30), max_size=40).map(sorted),
    st.sets(st.integers(1, 40)),
    st.integers(0, 32),
    st.integers(0, 45),
)
def test_retention_by_bisection_keeps_exactly_the_young_and_the_newest(
    times: list[int], gone: set[int], cutoff: int, count: int
) -> None:
    """Seqs with gaps (entries already pruned or copied), times growing with seq."""
    kept = [entry(float(t), "cli:a", "queue", seq) for seq, t in enumerate(times, 1)
            if seq not in gone]  # fmt: skip
    db = sqlite3.connect(":memory:")
    audit_table.create(db)
    audit_table.insert(db, kept)
    newest = max((e.seq for e in kept), default=0)
    dropped = audit_table.prune(db, now=cutoff + 86_400.0, days=1.0, count=count)
    survivors = [e for e in kept if e.ts >= cutoff and e.seq > newest - count]
    assert audit_table.select(db, Query(limit=100)) == survivors
    assert dropped == len(kept) - len(survivors)
