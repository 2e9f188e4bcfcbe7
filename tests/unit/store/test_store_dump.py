"""A job store moved whole (luxid.storage.dump, docs/contracts.md#backups-and-store-copy):
every job with its status, log and archive mark, the drain flag, and the id counter even
above the highest stored job, read back the same from the store it was written into;
and SQLite's online backup is one commit."""

from __future__ import annotations

from pathlib import Path

from luxid.jobs import Job, add_log, finish_opcode, mark_opcode_running, new_job, start_job
from luxid.storage import SqliteJobStore
from luxid.storage.dump import JobsDump, backup_sqlite, read_store, write_sqlite

OPS = [{"OP_ID": "OP_TEST_DELAY", "duration": 0.5, "reason": [["cli", "test", 1]]}]


def finished(job: Job) -> Job:
    job = start_job(job, 5.0, pid=4000 + job.id, pid_start=4.0)
    job = mark_opcode_running(job, 0, 5.0)
    job = add_log(job, 0, 5.0, "message", f"job {job.id} ran")
    return finish_opcode(job, 0, 6.0, True, {"id": job.id})


def source(path: Path) -> SqliteJobStore:
    """Jobs 1..4: 1 archived, 2 finished, 3 and 4 queued; the queue drained."""
    store = SqliteJobStore.open(path)
    jobs = [new_job(i, OPS, 1.0) for i in range(1, 5)]
    with store.transaction() as tx:
        tx.insert(jobs)
    with store.transaction() as tx:
        tx.update([finished(jobs[0]), finished(jobs[1])])
        tx.set_meta("drained", 1)
    with store.transaction() as tx:
        assert tx.archive([1]) == [1]
    return store


def test_a_dump_reads_back_the_same_and_keeps_the_counter(tmp_path: Path) -> None:
    store = source(tmp_path / "a.sqlite")
    dump = read_store(store)
    store.close()
    assert dump.last_job_id == 4 and dump.meta == {"drained": 1}
    assert [(j.id, j.archived) for j in dump.jobs] == [
        (1, True),
        (2, False),
        (3, False),
        (4, False),
    ]
    dump.last_job_id = 9  # ids allocated above the stored jobs stay allocated
    write_sqlite(dump, tmp_path / "b.sqlite")
    copy = SqliteJobStore.open(tmp_path / "b.sqlite")
    try:
        again = read_store(copy)
        assert copy.last_job_id == 9
    finally:
        copy.close()
    assert again == JobsDump(9, dump.jobs, {"drained": 1})


def test_the_online_backup_is_a_store_of_its_own(tmp_path: Path) -> None:
    store = source(tmp_path / "a.sqlite")
    try:
        assert backup_sqlite(store.path, tmp_path / "copy.sqlite") == 4
        with store.transaction() as tx:  # the source goes on; the copy does not see it
            tx.insert([new_job(5, OPS, 2.0)])
        assert not (tmp_path / "copy.sqlite-wal").exists()
        copy = SqliteJobStore.open(tmp_path / "copy.sqlite")
        try:
            assert copy.last_job_id == 4 and copy.meta("drained") == 1
            assert read_store(copy).jobs == read_store(store).jobs[:4]
        finally:
            copy.close()
    finally:
        store.close()
