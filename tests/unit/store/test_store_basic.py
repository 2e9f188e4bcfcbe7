"""Job store: round trips, id allocation, archive, auto-archive, counts, errors, speed."""

from __future__ import annotations

import os
import sqlite3
import stat
import statistics
import threading
import time
from pathlib import Path

import pytest
from store_testlib import (
    archive,
    counts,
    is_archived,
    load_archived,
    submit,
    submit_many,
    tx_submit,
    update_jobs,
)

from client import errors
from luxid.jobs import (
    Job,
    add_log,
    cancel_job,
    finish_opcode,
    job_status,
    mark_opcode_running,
    new_job,
    start_job,
)
from luxid.storage import SqliteJobStore, default_path, open_store

OPS = [{"OP_ID": "OP_TEST_DELAY", "duration": 0.5, "reason": [["cli", "test", 1]]}]


def builder(ops: list[dict[str, object]] = OPS, now: float = 1000.0):  # type: ignore[no-untyped-def]
    return lambda job_id: new_job(job_id, ops, now)


def finished(job: Job, now: float, success: bool = True) -> Job:
    job = start_job(job, now, pid=4000 + job.id, pid_start=now - 1)
    job = mark_opcode_running(job, 0, now)
    job = add_log(job, 0, now, "message", f"job {job.id} ran")
    return finish_opcode(job, 0, now, success, {"id": job.id})


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return default_path(tmp_path / "state")


@pytest.fixture
def store(db: Path):  # type: ignore[no-untyped-def]
    s = SqliteJobStore.open(db)
    yield s
    s.close()


# --------------------------------------------------------------------- basics


def test_open_sets_wal_full_sync_and_private_file(db: Path) -> None:
    with SqliteJobStore.open(db) as s:
        assert s._conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert s._conn.execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
        assert s.last_job_id == 0
    assert db.name == "jobs.sqlite"
    assert stat.S_IMODE(os.stat(db).st_mode) == 0o600


def test_round_trip_through_reopen(db: Path) -> None:
    ops = [
        {"OP_ID": "OP_TEST_DELAY", "duration": 1, "priority": -3, "comment": "c"},
        {"OP_ID": "OP_CLUSTER_RENAME", "name": "x", "depends": [[-1, ["success"]]]},
    ]
    with SqliteJobStore.open(db) as s:
        first = submit(s, builder())
        job = submit(s, builder(ops, now=2000.0))
        job = start_job(job, 2001.0, pid=321, pid_start=2000.5)
        job = mark_opcode_running(job, 0, 2002.0)
        job = add_log(job, 0, 2002.1, "message", "one")
        update_jobs(s, [job])
        job = add_log(job, 0, 2002.2, "message", {"structured": [1, 2]})
        job = finish_opcode(job, 0, 2003.0, True, {"result": [1, 2.5, None]})
        job = add_log(job, 1, 2003.5, "message", "three")
        update_jobs(s, [job])
    with SqliteJobStore.open(db) as s:
        live = {j.id: j for j in s.load_live()}
        assert live == {first.id: first, job.id: job}
        assert live[job.id].process_id == 321 and live[job.id].process_start == 2000.5
        assert job_status(live[job.id]) == "running"
        assert s.load_job(job.id) == job
        # the log rows were written once each, not once per update
        assert s._conn.execute("SELECT COUNT(*) FROM logs").fetchone()[0] == 3


def test_pending_reason_is_not_persisted(store: SqliteJobStore) -> None:
    from luxid.jobs import set_pending_reason

    job = submit(store, builder())
    update_jobs(store, [set_pending_reason(job, "max running jobs reached")])
    assert store.load_job(job.id) == job


# ----------------------------------------------------------------------- ids


def test_ids_are_consecutive_in_a_batch_and_increase(store: SqliteJobStore) -> None:
    jobs = submit_many(store, [builder()] * 5)
    assert [j.id for j in jobs] == [1, 2, 3, 4, 5]
    assert submit(store, builder()).id == 6
    assert store.last_job_id == 6


def test_ids_never_reused_after_archive_and_reopen(db: Path) -> None:
    with SqliteJobStore.open(db) as s:
        jobs = submit_many(s, [builder()] * 3)
        update_jobs(s, [finished(j, 1100.0) for j in jobs])
        assert archive(s, [1, 2, 3]) == [1, 2, 3]
        assert s.load_live() == []
    with SqliteJobStore.open(db) as s:
        assert s.last_job_id == 3
        assert submit(s, builder()).id == 4


def test_failed_batch_stores_nothing_and_consumes_no_id(store: SqliteJobStore) -> None:
    submit(store, builder())

    def bad(job_id: int) -> Job:
        raise errors.InvalidOpcode("nope")

    with pytest.raises(errors.InvalidOpcode):
        submit_many(store, [builder(), bad])
    assert store.last_job_id == 1
    assert [j.id for j in store.load_live()] == [1]
    with pytest.raises(errors.InvalidParams):
        submit(store, lambda job_id: new_job(job_id + 1, OPS, 1.0))
    assert submit(store, builder()).id == 2


def test_transaction_batches_and_rolls_back_together(store: SqliteJobStore) -> None:
    a = submit(store, builder())
    with store.transaction() as tx:
        b, c = tx_submit(tx, [builder(), builder()])
        tx.update([cancel_job(a, 5.0).job])
        (d,) = tx_submit(tx, [builder()])
    assert [b.id, c.id, d.id] == [2, 3, 4]
    assert store.status_of(1) == "canceled"
    with pytest.raises(RuntimeError), store.transaction() as tx:
        tx_submit(tx, [builder()])
        tx.update([cancel_job(b, 6.0).job])
        raise RuntimeError("shell crashed mid-batch")
    assert store.last_job_id == 4
    assert store.status_of(2) == "queued"
    assert store.status_of(5) is None
    assert submit(store, builder()).id == 5


def test_concurrent_submits_from_threads_get_distinct_ids(store: SqliteJobStore) -> None:
    got: list[int] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(50):
            job = submit(store, builder())
            with lock:
                got.append(job.id)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(got) == list(range(1, 201))


# ------------------------------------------------------------------ updates


def test_update_unknown_job_is_not_found_and_changes_nothing(store: SqliteJobStore) -> None:
    job = submit(store, builder())
    ghost = new_job(99, OPS, 1.0)
    with pytest.raises(errors.NotFound):
        update_jobs(store, [cancel_job(job, 2.0).job, ghost])
    assert store.status_of(job.id) == "queued"


def test_update_of_a_stale_job_does_not_duplicate_logs(db: Path) -> None:
    with SqliteJobStore.open(db) as s:
        job = submit(s, builder())
        job = add_log(start_job(job, 1.0, 1, 1.0), 0, 2.0, "message", "a")
        update_jobs(s, [job])
    with SqliteJobStore.open(db) as s:  # fresh memory: the stored serial comes from the db
        job = add_log(job, 0, 3.0, "message", "b")
        update_jobs(s, [job])
        update_jobs(s, [job])
        assert [e.message for e in s.load_job(job.id).ops[0].log] == ["a", "b"]  # type: ignore[union-attr]


# ------------------------------------------------------------------ archive


def test_archive_only_finalized_live_jobs(store: SqliteJobStore) -> None:
    jobs = submit_many(store, [builder()] * 4)
    update_jobs(store, [finished(jobs[0], 10.0), cancel_job(jobs[1], 11.0).job])
    assert archive(store, [1, 2, 3, 77]) == [1, 2]
    assert archive(store, [1]) == []
    assert [j.id for j in store.load_live()] == [3, 4]
    archived = load_archived(store, 1)
    assert archived.archived and archived.ops[0].result == {"id": 1}
    assert archived.ops[0].log[0].message == "job 1 ran"
    with pytest.raises(errors.NotFound):
        load_archived(store, 3)
    with pytest.raises(errors.NotFound):
        load_archived(store, 1234)
    assert is_archived(store, 1) is True and is_archived(store, 3) is False
    assert is_archived(store, 1234) is None
    assert store.statuses([1, 2, 3, 1234]) == {1: "success", 2: "canceled", 3: "queued"}


def test_auto_archive_by_age_with_limit(store: SqliteJobStore) -> None:
    jobs = submit_many(store, [builder()] * 6)
    update_jobs(
        store,
        [
            finished(jobs[0], 100.0),
            finished(jobs[1], 200.0, success=False),
            finished(jobs[2], 300.0),
            cancel_job(jobs[3], 150.0).job,
            start_job(jobs[4], 50.0, 1, 1.0),  # running: never archived
        ],
    )
    archived, remaining = store.auto_archive(older_than=250.0, limit=2)
    assert archived == [1, 2] and remaining == 1
    archived, remaining = store.auto_archive(older_than=250.0, limit=100)
    assert archived == [4] and remaining == 0
    assert store.auto_archive(older_than=1e12, limit=100) == ([3], 0)
    assert [j.id for j in store.load_live()] == [5, 6]


def test_counts(store: SqliteJobStore) -> None:
    jobs = submit_many(store, [builder()] * 5)
    update_jobs(
        store, [finished(jobs[0], 1.0), finished(jobs[1], 1.0), cancel_job(jobs[2], 1.0).job]
    )
    archive(store, [1])
    assert counts(
        store,
    ) == {"queued": 2, "success": 1, "canceled": 1}
    assert counts(store, archived=True) == {"success": 1}
    assert counts(store, archived=None) == {"queued": 2, "success": 2, "canceled": 1}


# ------------------------------------------------------------------- errors


def test_open_failure_is_storage_error(tmp_path: Path) -> None:
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(errors.StorageError):
        SqliteJobStore.open(tmp_path / "dir.sqlite")
    (tmp_path / "file").write_text("")
    with pytest.raises(errors.StorageError):
        open_store(tmp_path / "file")  # the state dir is a file: OSError


def test_sqlite_failure_is_storage_error_and_changes_nothing(store: SqliteJobStore) -> None:
    submit(store, builder())
    real = store._conn
    store._conn = sqlite3.connect(":memory:", isolation_level=None)  # no tables: writes fail
    try:
        with pytest.raises(errors.StorageError):
            submit(store, builder())
        with pytest.raises(errors.StorageError):
            store.load_live()
    finally:
        store._conn.close()
        store._conn = real
    assert store.last_job_id == 1
    assert submit(store, builder()).id == 2


def test_disk_full_is_storage_error_and_changes_nothing(store: SqliteJobStore) -> None:
    first = submit(store, builder())
    pages = store._conn.execute("PRAGMA page_count").fetchone()[0]
    store._conn.execute(f"PRAGMA max_page_count = {pages}")
    big = [{"OP_ID": "OP_TEST_DELAY", "duration": 0, "payload": "x" * 20_000}]
    with pytest.raises(errors.StorageError) as info:
        submit_many(store, [builder(big)] * 5)
    assert "full" in info.value.message
    with pytest.raises(errors.StorageError):
        update_jobs(store, [add_log(start_job(first, 1.0, 1, 1.0), 0, 1.0, "m", "y" * 50_000)])
    assert store.last_job_id == 1
    assert store.load_live() == [first]
    store._conn.execute("PRAGMA max_page_count = 1073741823")
    assert submit(store, builder(big)).id == 2


def test_corrupt_job_data_is_storage_error(store: SqliteJobStore) -> None:
    job = submit(store, builder())
    store._conn.execute("UPDATE jobs SET data = x'c1c1' WHERE id = ?", (job.id,))
    with pytest.raises(errors.StorageError):
        store.load_live()


def test_newer_schema_is_refused(db: Path) -> None:
    SqliteJobStore.open(db).close()
    conn = sqlite3.connect(db)
    conn.execute("PRAGMA user_version = 99")
    conn.close()
    with pytest.raises(errors.StorageError):
        SqliteJobStore.open(db)


# -------------------------------------------------------------------- speed


def _bare_commit_ms(conn: sqlite3.Connection, n: int) -> float:
    """Median ms of a bare sqlite commit (WAL, synchronous=FULL): the disk's own cost."""
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO t(data) VALUES (?)", (b"x" * 400,))
        conn.execute("COMMIT")
        lat.append(time.perf_counter() - t)
    return statistics.median(lat) * 1e3


def _submit_ms(store: SqliteJobStore, n: int) -> float:
    lat = []
    for _ in range(n):
        t = time.perf_counter()
        submit(store, builder())
        lat.append(time.perf_counter() - t)
    return statistics.median(lat) * 1e3


def test_submit_cost_single_and_batched(store: SqliteJobStore, tmp_path: Path) -> None:
    """submit_job ≥ 1,000 jobs/s from one client, one durable commit per submit.

    A durable submit is bounded by the disk's fsync, which on this shared machine moves
    from 0.25 ms (idle: ~4,000 submits/s) to 4 ms when neighbours write. So the test
    checks what the store controls, against references taken in the same run:
    its own work (synchronous=OFF) is cheap, a durable submit costs about one bare
    sqlite commit, and batching shares the commit. Absolute figures are printed.
    """
    bare = sqlite3.connect(tmp_path / "bare.sqlite", isolation_level=None)
    bare.execute("PRAGMA journal_mode=WAL")
    bare.execute("PRAGMA synchronous=FULL")
    bare.execute("CREATE TABLE t (id INTEGER PRIMARY KEY, data BLOB)")
    nosync = SqliteJobStore.open(tmp_path / "nosync.sqlite")
    nosync._conn.execute("PRAGMA synchronous=OFF")
    n = 100
    bare_ms = store_ms = cpu_ms = float("inf")
    batched = 0.0
    for _ in range(3):
        bare_ms = min(bare_ms, _bare_commit_ms(bare, n))
        store_ms = min(store_ms, _submit_ms(store, n))
        cpu_ms = min(cpu_ms, _submit_ms(nosync, n))
        t0 = time.perf_counter()
        for _ in range(6):
            submit_many(store, [builder()] * 50)
        batched = max(batched, 300 / (time.perf_counter() - t0))
    bare.close()
    nosync.close()
    print(
        f"\nstore submit (medians): durable {store_ms:.3f} ms ({1e3 / store_ms:.0f}/s),"
        f" bare sqlite commit {bare_ms:.3f} ms, store work without fsync {cpu_ms:.3f} ms"
        f" ({1e3 / cpu_ms:.0f}/s); batched(50) durable {batched:.0f} jobs/s"
    )
    assert cpu_ms <= 0.2, "the store's own work per submit must stay far below 1 ms"
    assert store_ms <= 2 * bare_ms + 0.5, "a submit must cost about one bare commit"
    # A batch of 50 pays one commit: per job, the store's own work plus a small share of
    # it. Judged against the commit's measured cost, so a disk whose fsync is nearly free
    # (CI's) asks nothing batching cannot give.
    commit_ms = max(store_ms - cpu_ms, 0.0)
    assert 1e3 / batched <= cpu_ms + commit_ms / 5, "batching must share the commit cost"
