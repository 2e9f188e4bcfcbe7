"""luxid's events beyond the count floor but within the age floor (docs/contracts.md#events):
the SQLite store keeps them, a reopened store's ring holds only the newest `keep` in
memory and serves the older ones from the store, the same as before the restart."""

from __future__ import annotations

import msgspec

from client.api.common import EventBatch
from client.events import Retention, new_event
from luxid.storage import SqliteJobStore


def drafts(count: int, ts: float) -> list:
    return [new_event("luxid", "job", "status", f"job/{i}", {"n": i}, ts) for i in range(count)]


def read_all(ring, after: int) -> EventBatch:
    wire = msgspec.json.encode(ring.read(after, {"job"}, 10**6))
    return msgspec.json.decode(wire, type=EventBatch)


def test_a_reopened_store_serves_the_age_floors_events_from_disk(tmp_path):
    path = tmp_path / "jobs.sqlite"
    retention = Retention(keep=50, min_age=600.0)  # every event here is younger than that
    with SqliteJobStore.open(path) as store:
        store.load_events(retention)
        for chunk in range(4):
            with store.transaction() as tx:
                tx.append_events(drafts(100, 1000.0 + chunk))
    with SqliteJobStore.open(path) as store:
        ring = store.load_events(retention)
        assert len(ring) == 50 and ring.last == 400 and ring.spilled == 350
        batch = read_all(ring, 0)
        assert not batch.gap
        assert [e.index for e in batch.events] == list(range(1, 401))
        assert [e.index for e in read_all(ring, 360).events] == list(range(361, 401))
        with store.transaction() as tx:  # new events append above, in memory
            tx.append_events(drafts(10, 2000.0))
        ring.extend(tx.events)
        assert len(ring) == 50 and ring.spilled == 360
        assert [e.index for e in read_all(ring, 355).events] == list(range(356, 411))


def test_a_count_only_retention_keeps_no_more_than_its_count(tmp_path):
    """`--event-retention N` (no age floor): older events are a gap, as before."""
    path = tmp_path / "jobs.sqlite"
    with SqliteJobStore.open(path) as store:
        store.load_events(Retention(keep=50, min_age=None))
        with store.transaction() as tx:
            tx.append_events(drafts(200, 1000.0))
    with SqliteJobStore.open(path) as store:
        ring = store.load_events(Retention(keep=50, min_age=None))
        batch = read_all(ring, 0)
        assert batch.gap and [e.index for e in batch.events] == list(range(151, 201))


def test_pruning_drops_the_old_beyond_keep_and_keeps_the_young(tmp_path):
    with SqliteJobStore.open(tmp_path / "jobs.sqlite") as store:
        store.load_events(Retention(keep=50, min_age=600.0))
        with store.transaction() as tx:
            tx.append_events(drafts(700, 1000.0))  # old by the time the young come
        with store.transaction() as tx:
            tx.append_events(drafts(700, 5000.0))  # the 1,000th event prunes
        ring = store.load_events(Retention(keep=50, min_age=600.0))
        assert ring.pruned == 700  # every old one went (the young ones are > 50)
        batch = read_all(ring, 0)
        assert batch.gap and [e.index for e in batch.events] == list(range(701, 1401))
