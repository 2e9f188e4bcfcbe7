"""lw-rapi's own audit file (client.audit_file): appends numbered in order by any number
of writers, durable retention, reads by query, and the same table as the daemons'."""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import sqlite3
import threading
import time
from pathlib import Path

import msgspec
import pytest

from client import audit_file, audit_table
from client._server.audit_sql import AuditDb
from client.audit import RETENTION_DAYS, Query


def _add(directory: Path, method: str, target: str, actor: str, ts: float) -> int:
    return audit_file.append(directory, audit_file.rapi_entry(method, target, actor, ts)).seq


def test_append_numbers_entries_and_read_answers_queries(tmp_path: Path) -> None:
    now = time.time()
    assert audit_file.read(tmp_path, Query()) == []  # no file: no entries, nothing made
    assert not audit_file.audit_path(tmp_path).exists()
    seqs = [
        _add(tmp_path, "rapi_user_add", "rapi-user/alice", "cli:root", now),
        _add(tmp_path, "token_create", "token/t1", "rapi:alice", now + 1),
        _add(tmp_path, "rapi_user_remove", "rapi-user/alice", "cli:root", now + 2),
    ]
    assert seqs == [1, 2, 3]
    every = audit_file.read(tmp_path, Query())
    assert [e.seq for e in every] == [1, 2, 3]
    first = every[0]
    assert (first.daemon, first.uid, first.pid, first.job_id, first.outcome) == (
        "rapi",
        os.getuid(),
        os.getpid(),
        None,
        "ok",
    )
    assert [e.seq for e in audit_file.read(tmp_path, Query(actor="cli:root"))] == [1, 3]
    assert [e.seq for e in audit_file.read(tmp_path, Query(target="token/t1"))] == [2]
    assert [e.seq for e in audit_file.read(tmp_path, Query(since=now + 1))] == [2, 3]
    assert [e.seq for e in audit_file.read(tmp_path, Query(until=now + 1))] == [1]
    assert [e.seq for e in audit_file.read(tmp_path, Query(limit=2))] == [2, 3]
    assert audit_file.audit_path(tmp_path).stat().st_mode & 0o777 == 0o600
    # Made whole under a private name: in WAL mode, and that name is gone.
    assert not [p.name for p in tmp_path.iterdir() if p.name.startswith(".")]
    with contextlib.closing(sqlite3.connect(audit_file.audit_path(tmp_path))) as db:
        assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)


def test_retention_drops_entries_older_than_the_kept_days(tmp_path: Path) -> None:
    now = time.time()
    _add(tmp_path, "rapi_user_add", "rapi-user/old", "cli:root", now - RETENTION_DAYS * 86_400 - 1)
    _add(tmp_path, "rapi_user_add", "rapi-user/new", "cli:root", now)
    assert [e.target for e in audit_file.read(tmp_path, Query())] == ["rapi-user/new"]


def _writer(directory: str, count: int, start: threading.Barrier | None = None) -> None:
    if start is not None:
        start.wait()
    for i in range(count):
        _add(Path(directory), "token_create", f"token/{os.getpid()}-{i}", "cli:t", time.time())


def _run_writers(directory: Path, writers: int, count: int, together: bool) -> None:
    """`writers` processes appending `count` entries each, all let go at once if
    `together`; each must end well."""
    ctx = multiprocessing.get_context("fork")
    start = ctx.Barrier(writers) if together else None
    procs = [
        ctx.Process(target=_writer, args=(str(directory), count, start)) for _ in range(writers)
    ]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(30)
        assert proc.exitcode == 0


def test_concurrent_writers_number_every_entry_once(tmp_path: Path) -> None:
    """lw and lw-rapi may append at once: each append reads the last seq and inserts the
    next in one write transaction, so no seq is taken twice and none is skipped."""
    _run_writers(tmp_path, writers=4, count=15, together=False)
    entries = audit_file.read(tmp_path, Query())
    assert [e.seq for e in entries] == list(range(1, 61))
    assert len({e.target for e in entries}) == 60


def test_writers_starting_together_on_a_new_file_all_succeed(tmp_path: Path) -> None:
    """The file's first appends, all at once: none changes the journal mode under the
    others (which fails at once, without waiting: CI saw "database is locked")."""
    for trial in range(8):
        directory = tmp_path / str(trial)
        _run_writers(directory, writers=6, count=3, together=True)
        assert [e.seq for e in audit_file.read(directory, Query())] == list(range(1, 19))


def test_an_append_waits_for_another_writer_on_a_file_in_rollback_mode(tmp_path: Path) -> None:
    """A file left in rollback mode (an older lw made it empty, and its first append did
    not get to switch it) while another writer holds its transaction: the append waits for
    it, as on any file, instead of trying to switch the mode and failing at once."""
    path = audit_file.audit_path(tmp_path)
    with sqlite3.connect(path) as made:
        audit_table.create(made)
    holder = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    release = threading.Timer(0.3, holder.execute, ("COMMIT",))
    release.start()
    try:
        t0 = time.monotonic()
        assert _add(tmp_path, "token_create", "token/t", "cli:t", time.time()) == 1
        assert time.monotonic() - t0 >= 0.25  # it waited for the holder's commit
    finally:
        release.join()
        holder.close()


def test_the_file_is_the_daemons_audit_table(tmp_path: Path) -> None:
    """One format: the daemons' AuditDb reads what an append wrote, and the other way."""
    _add(tmp_path, "rapi_user_add", "rapi-user/a", "cli:root", time.time())
    db = AuditDb(audit_file.audit_path(tmp_path))
    try:
        (written,) = db.select(Query())
        assert written.target == "rapi-user/a"
        db.insert([msgspec.structs.replace(written, seq=2, target="rapi-user/b")])
    finally:
        db.close()
    assert [e.target for e in audit_file.read(tmp_path, Query())] == ["rapi-user/a", "rapi-user/b"]
    assert _add(tmp_path, "rapi_user_remove", "rapi-user/a", "cli:root", time.time()) == 3


def test_an_unreadable_file_is_an_error_not_an_empty_log(tmp_path: Path) -> None:
    audit_file.audit_path(tmp_path).write_bytes(b"not a database, " * 100)
    with pytest.raises(sqlite3.Error):
        audit_file.read(tmp_path, Query())
