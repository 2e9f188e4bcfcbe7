"""rapi.dashboard.view: the dashboard document built from what the daemons answer, and
luxid.overview: the choice of jobs it shows, made by luxid (query_queue_overview)."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from luxid.jobs import (
    Job,
    fail_job,
    finish_opcode,
    mark_canceled,
    mark_opcode_waiting,
    new_job,
    set_pending_reason,
    start_job,
)
from luxid.overview import queue_overview
from rapi.dashboard.view import (
    JOB_FIELDS,
    MAX_QUEUED,
    MAX_RECENT,
    build_view,
    detail_ids,
    owner_label,
)

STATUSES = ["queued", "waiting", "running", "canceling", "success", "error", "canceled"]
REASONS = [None, "max running jobs reached", "paused by filter f1", "waiting for job 3"]


def row(job_id: int, status: str, reason: str | None = None, fields=JOB_FIELDS) -> list:
    job = {
        "id": job_id, "status": status, "summary": [f"TEST_DELAY({job_id})"], "priority": 0,
        "pending_reason": reason, "opstatus": [status], "received_ts": 1.0, "start_ts": None,
        "end_ts": None,
    }  # fmt: skip
    return [job[f] for f in fields]


def overview_of(jobs):
    """What query_queue_overview answers for (id, status, reason) jobs in id order."""
    queued = [(i, r) for i, s, r in jobs if s == "queued"]
    return {
        "queued": [i for i, _ in queued][:MAX_QUEUED],
        "queued_total": len(queued),
        "active": [i for i, s, _ in jobs if s in ("waiting", "running", "canceling")],
        "recent": [i for i, s, _ in jobs if s in ("success", "error", "canceled")][::-1][
            :MAX_RECENT
        ],
        "pending_reasons": [list(p) for p in Counter(r for _, r in queued).most_common()],
    }


def view_of(config, info, jobs, filters, locks):
    """build_view as live.snapshot calls it: luxid's overview, details of the chosen."""
    overview = overview_of(jobs)
    chosen = set(detail_ids(overview))
    details = [row(i, s, r) for i, s, r in jobs if i in chosen]
    return build_view(config, info, overview, details, filters, locks)


CONFIG = {
    "serial_no": 9,
    "cluster": {"name": "c1"},
    "nodegroups": {"g": {"name": "default"}},
    "nodes": {
        "u2": {"name": "n2", "group": "g", "primary_ip": "192.0.2.2"},
        "u1": {"name": "n1", "group": "g", "primary_ip": "192.0.2.1", "drained": True},
    },
    "instances": {"i1": {"name": "web", "primary_node": "u1", "memory": 512, "admin_state": "up"}},
    "drains": {"node/n1": {"status": "draining", "total": 4, "remaining": 1, "message": "m"}},
}
LOCKS = {
    "locks": [
        {"name": "node/n1", "owners": [{"client_id": "job-5:100:1.5", "mode": "exclusive"}]},
        {"name": "cluster/BGL", "owners": [{"client_id": "lw-cli:7:2.0", "mode": "shared"}]},
    ],
    "pending": [
        {
            "client_id": "job-6:101:1.6",
            "priority": 0,
            "request": [["node/n1", "exclusive"]],
            "since": 3.0,
        },
    ],
}


def test_the_view_joins_jobs_locks_nodes_and_drains():
    info = {"counts": {"running": 1}, "drained": False, "filters": 0, "max_running_jobs": 20}
    jobs = [(5, "running", None), (6, "waiting", None), (7, "success", None)]
    view = view_of(CONFIG, info, jobs, [], LOCKS)
    assert [n["name"] for n in view["nodes"]] == ["n1", "n2"]
    assert view["nodes"][0] == {
        "name": "n1", "group": "default", "ip": "192.0.2.1", "offline": False, "drained": True,
        "instances": 1,
    }  # fmt: skip
    assert view["instances"] == [
        {"name": "web", "node": "n1", "state": "up", "memory": 512, "vcpus": None}
    ]
    running, waiting = view["active"]
    assert running["locks"] == [["node/n1", "exclusive"]] and running["wants"] == []
    assert waiting["wants"] == [["node/n1", "exclusive"]]
    assert [w["label"] for w in view["waiters"]] == ["job 6"]
    assert view["locks"][0]["owners"] == [
        {"job": None, "label": "lw-cli (pid 7)", "pid": "7", "mode": "shared"}
    ]
    assert view["drains"] == [
        {"target": "node/n1", "status": "draining", "total": 4, "remaining": 1, "percent": 75,
         "deadline": None, "message": "m"}
    ]  # fmt: skip
    assert [j["id"] for j in view["recent"]] == [7]
    assert build_view({}, {}, {}, [], [], {})["drains"] == []


def test_owner_label_names_jobs_and_other_clients():
    assert owner_label("job-42:1234:17.5") == {"job": 42, "label": "job 42", "pid": "1234"}
    assert owner_label("lw-rapi:9:1.0")["label"] == "lw-rapi (pid 9)"
    assert owner_label("odd")["label"] == "odd"


@settings(max_examples=50, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(STATUSES), st.sampled_from(REASONS)), max_size=400))
def test_every_queued_job_is_shown_or_counted_with_its_reason(jobs):
    view = view_of({}, {}, [(i + 1, s, r) for i, (s, r) in enumerate(jobs)], [], {})
    queued = [(i + 1, r) for i, (s, r) in enumerate(jobs) if s == "queued"]
    assert view["queued_total"] == len(queued)
    assert [j["id"] for j in view["queued"]] == [i for i, _ in queued][:MAX_QUEUED]
    reasons = dict(view["pending_reasons"])
    assert sum(reasons.values()) == len(queued)
    for reason in REASONS:
        expected = sum(1 for _, r in queued if r == reason)
        assert reasons.get(reason or "about to start", 0) == expected
    assert {j["id"] for j in view["active"]} == {
        i + 1 for i, (s, _) in enumerate(jobs) if s in ("waiting", "running", "canceling")
    }
    finished = [i + 1 for i, (s, _) in enumerate(jobs) if s in ("success", "error", "canceled")]
    assert [j["id"] for j in view["recent"]] == finished[-MAX_RECENT:][::-1]


def job_in(job_id: int, status: str, reason: str | None) -> Job:
    """A job in `status` made by luxid's own transitions."""
    job = set_pending_reason(new_job(job_id, [{"OP_ID": "OP_TEST_DELAY"}], 1.0), reason)
    if status == "queued":
        return job
    if status == "canceled":
        return mark_canceled(job, 2.0)
    job = start_job(job, 2.0, 99, 1.0)
    if status == "waiting":
        return mark_opcode_waiting(job, 0, 3.0)
    if status == "success":
        return finish_opcode(job, 0, 3.0, True)
    if status == "error":
        return fail_job(job, 3.0, "boom")
    return job  # started, between opcodes: running


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from([s for s in STATUSES if s != "canceling"]),
                  st.sampled_from(REASONS)),
        max_size=400,
    ),
    st.integers(0, 250),
    st.integers(0, 20),
)  # fmt: skip
def test_luxid_chooses_what_the_overview_shows(jobs, queued_n, recent_n):
    live = {i + 1: job_in(i + 1, s, r) for i, (s, r) in enumerate(jobs)}
    # luxid's set of unfinished ids may still hold jobs that finished since.
    unfinished = {i for i, job in live.items() if job.end_ts is None or i % 3 == 0}
    got = queue_overview(live, unfinished, queued_n, recent_n)
    queued = [(i + 1, r) for i, (s, r) in enumerate(jobs) if s == "queued"]
    assert got.queued == [i for i, _ in queued][:queued_n]
    assert got.queued_total == len(queued)
    assert got.active == [i + 1 for i, (s, _) in enumerate(jobs) if s in ("waiting", "running")]
    finished = [i + 1 for i, (s, _) in enumerate(jobs) if s in ("success", "error", "canceled")]
    assert got.recent == finished[::-1][:recent_n]
    assert sorted(map(tuple, got.pending_reasons), key=repr) == sorted(
        Counter(r for _, r in queued).items(), key=repr
    )
    counts = [n for _, n in got.pending_reasons]
    assert counts == sorted(counts, reverse=True)
