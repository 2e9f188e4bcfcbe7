"""The queue drain core (docs/contracts.md#queue-drain) on worked examples."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client import errors
from luxid.drains import CancelJob, DeleteFilter, JobFacts, PutFilter, drain_status, queue_drain
from luxid.drains.effects import QUEUE_PREDICATES
from luxid.drains.view import ClusterView

NOW = 5000.0
FINAL = ("success", "error", "canceled")
EMPTY = ClusterView(nodes={}, instances={})


def started(mode: str = "hard", deadline: float | None = None):
    record = queue_drain.drain_queue(None, NOW, mode=mode, deadline=deadline, message="m")
    record, effects = queue_drain.step(record, {}, NOW)
    (put,) = effects
    assert isinstance(put, PutFilter) and put.uuid == record.filter_uuid
    return queue_drain.filter_set(record, 40, [38, 39, 40], NOW), put


@pytest.mark.parametrize(("mode", "action"), [("hard", "REJECT"), ("soft", "PAUSE")])
def test_start_adds_the_watermark_rule(mode, action):
    record, put = started(mode)
    assert put.action == action and put.predicates == QUEUE_PREDICATES
    assert put.reason[0][:2] == ["lw:drain", "m"]
    assert record.status == "draining" and record.watermark == 40 and record.total == 3
    status = drain_status(record, EMPTY, {})
    assert (status.mode, status.total, status.remaining, status.jobs) == (mode, 3, 3, [38, 39, 40])


def test_complete_when_every_job_up_to_the_watermark_finished():
    record, _ = started()
    jobs = {38: JobFacts(status="success"), 39: JobFacts(status="running")}
    record, effects = queue_drain.step(record, jobs, NOW + 1)
    assert effects == [] and record.status == "draining"
    assert drain_status(record, EMPTY, jobs).running == 1
    jobs |= {39: JobFacts(status="error", error="x"), 40: JobFacts(status="canceled")}
    record, _ = queue_drain.step(record, jobs, NOW + 2)
    assert record.status == "complete" and not record.deadline_reached
    texts = [text for _, _, text in record.events]
    assert texts[-1] == "all accepted jobs finished; queue drain complete"
    assert "job 39: error" in texts


@pytest.mark.parametrize(
    ("statuses", "running"),
    [
        (("queued", "queued", "queued"), 0),
        (("waiting", "waiting", "queued"), 2),  # started, waiting for their locks
        (("waiting", "running", "canceling"), 3),
        (("running", "success", "error"), 1),
    ],
)
def test_running_counts_the_jobs_that_started_and_did_not_end(statuses, running):
    record, _ = started()
    jobs = {job_id: JobFacts(status=s) for job_id, s in zip([38, 39, 40], statuses, strict=True)}
    record, _ = queue_drain.step(record, jobs, NOW + 1)
    assert drain_status(record, EMPTY, jobs).running == running


def test_nothing_to_wait_for_completes_at_once():
    record = queue_drain.drain_queue(None, NOW, mode="soft", deadline=None, message="")
    record = queue_drain.filter_set(record, 7, [], NOW)
    record, _ = queue_drain.step(record, {}, NOW)
    assert record.status == "complete"


def test_deadline_cancels_then_kills_after_thirty_seconds():
    record, _ = started(deadline=60)
    jobs = {38: JobFacts(status="running"), 39: JobFacts(status="queued")}
    record, effects = queue_drain.step(record, jobs, NOW + 60)
    assert effects == [CancelJob(target="queue", job_id=i) for i in (38, 39, 40)]
    assert record.deadline_reached and record.kill_at == NOW + 90
    jobs = {38: JobFacts(status="canceling"), 39: JobFacts(status="canceled"),
            40: JobFacts(status="canceled")}  # fmt: skip
    record, effects = queue_drain.step(record, jobs, NOW + 61)
    assert effects == []  # canceled once only
    record, effects = queue_drain.step(record, jobs, NOW + 90)
    assert effects == [CancelJob(target="queue", job_id=38, kill=True)]
    jobs[38] = JobFacts(status="error", error="killed")
    record, effects = queue_drain.step(record, jobs, NOW + 90.5)
    assert record.status == "complete" and record.deadline_reached
    assert record.events[-1][2] == "deadline reached; queue drain complete"


def test_the_grace_time_before_the_kill_is_luxid_s_option():
    record, _ = started(deadline=60)
    jobs = {38: JobFacts(status="running"), 39: JobFacts(status="queued")}
    record, _ = queue_drain.step(record, jobs, NOW + 60.25, kill_after=2)
    assert record.kill_at == NOW + 62.25
    jobs[38] = JobFacts(status="canceling")
    record, effects = queue_drain.step(record, jobs, NOW + 62, kill_after=2)
    assert effects == []
    record, effects = queue_drain.step(record, jobs, NOW + 62.25, kill_after=2)
    assert effects == [CancelJob(target="queue", job_id=38, kill=True)]
    assert record.events[-1][2] == "1 jobs still running 2 s after the deadline: killed"


def test_undrain_removes_the_rule_and_a_second_drain_changes_the_first():
    record, first = started("soft")
    again = queue_drain.drain_queue(record, NOW + 5, mode="hard", deadline=30, message="m")
    assert again.started_at == NOW and again.deadline == NOW + 35
    again, effects = queue_drain.step(again, {}, NOW + 5)
    # the same rule, put again with the new action (not a second rule), its predicate
    # holding the drain's watermark (putting it again moves the rule's own)
    assert effects == [PutFilter(target="queue", uuid=first.uuid, action="REJECT",
                                 reason=effects[0].reason,
                                 predicates=[["jobid", [">", "id", 40]]])]  # fmt: skip
    # the jobs after the watermark (44, held until now) are not the drain's
    again = queue_drain.filter_set(again, 45, [38, 39, 40, 44], NOW + 5)
    assert (again.watermark, again.total, again.filter_uuid) == (40, 3, first.uuid)
    assert drain_status(again, EMPTY, {}).jobs == [38, 39, 40]
    assert again.events[-1][2] == f"filter {first.uuid}: jobs after 40 are refused now"
    done, effects = queue_drain.undrain_queue(again, NOW + 6)
    assert effects == [DeleteFilter(target="queue", uuid=first.uuid)]
    assert done.status == "canceled" and done.filter_uuid is None
    assert done.events[-1][2] == "queue undrained"
    new = queue_drain.drain_queue(done, NOW + 7, mode="hard", deadline=None, message="")
    assert new.filter_uuid not in (None, first.uuid) and new.started_at == NOW + 7


@pytest.mark.parametrize(
    ("mode", "message", "action"),
    [("soft", "m", None), ("soft", "new reason", "PAUSE"), ("hard", "m", "REJECT")],
)
def test_an_update_keeps_the_watermark_and_puts_the_rule_only_if_it_changed(mode, message, action):
    record, _ = started("soft", deadline=60)
    again = queue_drain.drain_queue(record, NOW + 5, mode=mode, deadline=600, message=message)
    again, effects = queue_drain.step(again, {}, NOW + 5)
    assert (again.deadline, again.message, again.mode) == (NOW + 605, message, mode)
    if action is None:  # the deadline alone: the rule stays as it is
        assert effects == []
    else:
        (put,) = effects
        assert (put.action, put.reason[0][1]) == (action, message)
        assert put.predicates == [["jobid", [">", "id", 40]]]
        again = queue_drain.filter_set(again, 52, [38, 39, 40, 41, 50], NOW + 5)
    assert (again.started_at, again.watermark, again.total) == (NOW, 40, 3)
    assert [job.id for job in again.active] == [38, 39, 40]


def test_a_complete_drain_drained_again_waits_for_nothing_new():
    """Soft, complete, still holding the jobs after its watermark: a new message keeps
    them held, and the drain completes again at once."""
    record, _ = started("soft")
    done = {i: JobFacts(status="success") for i in (38, 39, 40)}
    record, _ = queue_drain.step(record, done, NOW + 1)
    assert record.status == "complete"
    again = queue_drain.drain_queue(record, NOW + 2, mode="soft", deadline=None, message="later")
    again, (put,) = queue_drain.step(again, done, NOW + 2)
    assert put.predicates == [["jobid", [">", "id", 40]]] and put.action == "PAUSE"
    again = queue_drain.filter_set(again, 60, [41, 59], NOW + 2)
    again, effects = queue_drain.step(again, done, NOW + 2)
    assert effects == [] and again.status == "complete" and again.total == 3


def test_a_rule_put_again_is_put_again_until_reported():
    """A crash between putting the changed rule and writing the record: the record
    written still has the old mode, and a new update puts the same rule again."""
    record, first = started("soft")
    again = queue_drain.drain_queue(record, NOW + 5, mode="hard", deadline=None, message="m")
    _, one = queue_drain.step(again, {}, NOW + 5)
    _, two = queue_drain.step(again, {}, NOW + 6)
    assert [e.uuid for e in one + two] == [first.uuid] * 2


def test_the_rule_is_put_again_until_its_watermark_is_known():
    """A crash between putting the rule and writing the record: the restarted pass puts
    the same rule again (an upsert), never a second one."""
    record = queue_drain.drain_queue(None, NOW, mode="hard", deadline=None, message="")
    _, first = queue_drain.step(record, {}, NOW)
    _, again = queue_drain.step(record, {}, NOW + 1)
    assert [e.uuid for e in first + again] == [record.filter_uuid] * 2


def test_a_bad_mode_or_deadline_is_invalid_params():
    with pytest.raises(errors.InvalidParams, match="mode"):
        queue_drain.drain_queue(None, NOW, mode="gentle", deadline=None, message="")
    with pytest.raises(errors.InvalidParams, match="deadline"):
        queue_drain.drain_queue(None, NOW, mode="hard", deadline=float("nan"), message="")


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(1, 40), unique=True, max_size=8),
    st.sampled_from([None, 0.0, 20.0]),
    st.lists(
        st.tuples(
            st.integers(0, 7),
            st.sampled_from(["running", "success", "error"]),
            st.sampled_from([0.0, 5.0, 31.0]),
        )
    ),
)
def test_random_queue_histories(waited, deadline, history):
    """Cancels once, kills only 30 s after the deadline and only what still runs,
    complete exactly when nothing it waits for is unfinished."""
    record = queue_drain.drain_queue(None, NOW, mode="hard", deadline=deadline, message="")
    record = queue_drain.filter_set(record, 40, waited, NOW)
    jobs = {i: JobFacts(status="queued") for i in waited}
    now, canceled, killed = NOW, Counter[int](), Counter[int]()
    for index, new_status, advance in [(0, "queued", 0.0), *history]:
        now += advance
        if waited and jobs[waited[index % len(waited)]].status not in FINAL:
            jobs[waited[index % len(waited)]] = JobFacts(status=new_status)
        effects = [None]
        while effects:  # the shell steps again after carrying out effects (job ends)
            record, effects = queue_drain.step(record, jobs, now)
            for effect in effects:
                assert isinstance(effect, CancelJob) and effect.job_id in waited
                if effect.kill:
                    assert deadline is not None and now >= NOW + deadline + 30
                    assert jobs[effect.job_id].status == "running"
                    killed[effect.job_id] += 1
                else:
                    assert deadline is not None and now >= NOW + deadline
                    canceled[effect.job_id] += 1
                    if jobs[effect.job_id].status == "queued":
                        jobs[effect.job_id] = JobFacts(status="canceled")
        assert max(canceled.values(), default=0) <= 1 and max(killed.values(), default=0) <= 1
        unfinished = [i for i in waited if jobs[i].status not in FINAL]
        assert (record.status == "complete") == (not unfinished)
        assert drain_status(record, EMPTY, jobs).remaining == len(unfinished)
    assert record.total == len(waited)
