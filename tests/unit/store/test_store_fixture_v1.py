"""A job store written by luxid as of commit dcd3966 (schema version 1) still loads.

`tests/fixtures/luxid_store_v1/jobs.sqlite` was written with that commit's own store and job
transitions (the script is in the fixture's README.md): eight jobs — finished ones (one
archived), an error, one canceled by a REJECT rule at submit, one `running` whose process is
dead, one queued with a dependency and a reason bucket, one paused between opcodes, one
plain queued.  Every later version must load it unchanged; the daemon-level check (the dead
job fails, the others run) is in tests/integration/test_luxid_crash.py.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from luxid.jobs import job_status
from luxid.storage import SqliteJobStore

FIXTURE = Path(__file__).parents[2] / "fixtures" / "luxid_store_v1" / "jobs.sqlite"
DEAD_PID = 2**22 + 17


@pytest.fixture
def store(tmp_path: Path):  # type: ignore[no-untyped-def]
    db = tmp_path / "jobs.sqlite"
    shutil.copyfile(FIXTURE, db)
    s = SqliteJobStore.open(db)
    yield s
    s.close()


def test_fixture_live_jobs_load_with_their_state(store: SqliteJobStore) -> None:
    live = {job.id: job for job in store.load_live()}
    assert sorted(live) == [2, 3, 4, 5, 6, 7, 8]
    assert {i: job_status(j) for i, j in live.items()} == {
        2: "success", 3: "error", 4: "canceled", 5: "running",
        6: "queued", 7: "queued", 8: "queued",
    }  # fmt: skip
    assert [op.result for op in live[2].ops] == [None, "done"]
    assert [e.message for op in live[2].ops for e in op.log] == [
        "job 2 op 0 ran", "job 2 op 1 ran",
    ]  # fmt: skip
    assert live[3].ops[0].result == ["OpExecError", ["it broke"]]
    assert live[3].ops[0].priority == -5
    assert live[4].ops[0].result == "rejected by filter 0a1b2c3d-0000-4000-8000-000000000001"
    dead = live[5]
    assert dead.process_id == DEAD_PID
    assert [op.status for op in dead.ops] == ["running", "queued"]
    assert [e.message for e in dead.ops[0].log] == ["sleeping"]
    assert live[6].depends[0].job_id == 5 and live[6].depends[0].statuses == ("success",)
    assert ["rapi", "rate-limit:2:fixture", 5] in live[6].ops[0].input["reason"]
    paused = live[7]
    assert paused.process_id is None and paused.paused
    assert [op.status for op in paused.ops] == ["success", "queued"]


def test_fixture_archive_counter_and_flags(store: SqliteJobStore) -> None:
    archived = store.load_job(1)
    assert archived is not None and archived.archived
    assert job_status(archived) == "success"
    assert archived.ops[0].result == {"slept": 0}
    assert store.last_job_id == 8
    assert store.meta("drained") == 0
    assert store.status_of(1) == "success"
