"""100,000 jobs through luxid (issue 5): submitted, finalized and archived without running
out of file descriptors or memory (Ganeti kept one file per job)."""

from __future__ import annotations

import sys
from pathlib import Path

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay

JOBS = 100_000
BATCH = 1000


@pytest.mark.timeout(600)
def test_100k_jobs_submitted_and_archived(daemon_factory):
    stack = Stack(daemon_factory)
    luxid = psutil.Process(stack.luxid.pid)
    fds_before = luxid.num_fds()
    uuid = stack.lc.replace_filter(
        uuid=None, priority=0, predicates=[], action="REJECT", reason=[]
    )  # every job is finalized (canceled) as it is stored
    last = 0
    for start in range(0, JOBS, BATCH):
        answers = stack.lc.submit_many_jobs(jobs=[[delay(0)] for _ in range(BATCH)])
        ids = [job_id for ok, job_id in answers if ok]
        assert len(ids) == BATCH and ids[0] == last + 1 and ids == sorted(ids)
        last = ids[-1]
        if start // BATCH % 10 == 9:
            archived, remaining = stack.lc.auto_archive_jobs(age=-1)
            assert (archived, remaining) == (10 * BATCH, 0)
            assert luxid.num_fds() <= fds_before + 8
    assert last == JOBS
    assert stack.lc.query_jobs(ids=None, fields=["id"]) == []
    assert (
        stack.lc.query_jobs(ids=[1, JOBS], fields=["archived", "status", "opresult"])
        == [[True, "canceled", [f"rejected by filter {uuid}"]]] * 2
    )
    assert luxid.memory_info().rss < 200 * 2**20
    stack.restart_luxid()
    stack.lc.delete_filter(uuid=uuid)
    assert stack.wait_final(stack.submit(delay(0))) == "success"
    assert stack.field(JOBS + 1, "id") == JOBS + 1
    stack.close()
