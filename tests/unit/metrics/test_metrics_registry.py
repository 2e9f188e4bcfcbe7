"""client.metrics: the catalogue of docs/contracts.md#observability, the registry's invariants, and
the RPC instrumentation."""

from __future__ import annotations

import asyncio
import math
from collections import Counter as Tally
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from client import errors
from client._server.metrics import Counter as MetricCounter
from client._server.metrics import Registry, instrument
from client.api.luxi import LuxiApi
from client.api.wconfd import WConfdApi
from client.metrics import BY_NAME, CATALOGUE, OVERFLOW, MetricDef

# The documented names (docs/contracts.md#observability) with their types and label sets.
DOCUMENTED = {
    "lockwarden_jobs": ("gauge", ("status",)),
    "lockwarden_jobs_submitted_total": ("counter", ()),
    "lockwarden_jobs_finished_total": ("counter", ("status",)),
    "lockwarden_job_queue_seconds": ("histogram", ("opcode",)),
    "lockwarden_job_run_seconds": ("histogram", ("opcode",)),
    "lockwarden_filter_verdicts_total": ("counter", ("action",)),
    "lockwarden_locks_held": ("gauge", ("level", "mode")),
    "lockwarden_lock_wait_seconds": ("histogram", ("level",)),
    "lockwarden_lock_requests_pending": ("gauge", ()),
    "lockwarden_deadlocks_total": ("counter", ()),
    "lockwarden_dead_clients_released_total": ("counter", ()),
    "lockwarden_journal_flush_seconds": ("histogram", ()),
    "lockwarden_rpc_requests_total": ("counter", ("daemon", "method", "outcome")),
    "lockwarden_rpc_seconds": ("histogram", ("daemon", "method")),
    "lockwarden_drains": ("gauge", ("status",)),
    "lockwarden_drain_remaining": ("gauge", ("target",)),
    "lockwarden_master": ("gauge", ("node",)),
}
FORBIDDEN_LABELS = {"job", "job_id", "id", "client", "client_id", "pid", "uuid"}


def test_catalogue_has_every_spec_name_with_its_type_and_labels():
    for name, (kind, labels) in DOCUMENTED.items():
        assert (BY_NAME[name].kind, BY_NAME[name].labels) == (kind, labels), name
    assert len(BY_NAME) == len(CATALOGUE), "a name appears twice"
    for defn in CATALOGUE:
        assert defn.help.strip(), f"{defn.name} has no help text"
        assert not FORBIDDEN_LABELS & set(defn.labels), defn.name


def test_each_daemon_keeps_its_own_metrics_and_both_keep_the_rpc_ones():
    wconfd, luxid = Registry("wconfd").snapshot(), Registry("luxid").snapshot()
    assert "lockwarden_locks_held" in wconfd and "lockwarden_locks_held" not in luxid
    assert "lockwarden_jobs" in luxid and "lockwarden_jobs" not in wconfd
    for snap in (wconfd, luxid):
        assert {"lockwarden_rpc_requests_total", "lockwarden_rpc_seconds_bucket"} <= set(snap)
    # Plain JSON, as get_metrics sends it.
    assert msgspec.json.decode(msgspec.json.encode(wconfd)) == wconfd


def test_a_fresh_registry_reads_zero_with_its_seeded_label_values():
    snap = Registry("luxid").snapshot()
    assert snap["lockwarden_jobs_submitted_total"] == 0
    assert [labels["status"] for labels, _ in snap["lockwarden_jobs"]] == [
        "queued", "waiting", "running", "canceling", "canceled", "success", "error"
    ]  # fmt: skip
    assert all(value == 0 for _, value in snap["lockwarden_jobs"])
    assert snap["lockwarden_job_queue_seconds_bucket"] == []
    wconfd = Registry("wconfd").snapshot()
    assert wconfd["lockwarden_journal_flush_seconds_count"] == 0
    assert wconfd["lockwarden_journal_flush_seconds_bucket"][-1] == [{"le": "+Inf"}, 0]


def test_definitions_that_cannot_be_rendered_are_refused():
    with pytest.raises(ValueError, match="_total"):
        MetricDef("x_count", "counter", "h", "luxid")
    with pytest.raises(ValueError, match="increasing"):
        MetricDef("x", "histogram", "h", "luxid", buckets=(1.0, 0.5))
    with pytest.raises(ValueError, match="bucket label"):
        MetricDef("x", "histogram", "h", "luxid", ("le",), (1.0,))
    reg = Registry("luxid")
    with pytest.raises(ValueError, match="cannot go down"):
        reg.counter("lockwarden_jobs_submitted_total").inc(by=-1)
    with pytest.raises(ValueError, match="takes labels"):
        reg.counter("lockwarden_jobs_finished_total").inc("success", "extra")
    with pytest.raises(TypeError, match="is a gauge"):
        reg.counter("lockwarden_jobs")


def as_dict(series: list[Any]) -> dict[tuple[tuple[str, str], ...], Any]:
    return {tuple(sorted(labels.items())): value for labels, value in series}


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abcdefgh"), st.integers(0, 5)), max_size=80))
def test_counter_totals_are_kept_and_series_stay_bounded(incs):
    defn = MetricDef("t_total", "counter", "h", "luxid", ("k",), max_series=4)
    reg = Registry("luxid")
    reg.metrics[defn.name] = counter = MetricCounter(defn)
    for key, by in incs:
        counter.inc(key, by=by)
    got = as_dict(reg.snapshot()["t_total"])
    # Never more than max_series label sets plus the overflow one; nothing lost.
    assert len(got) <= 5
    assert sum(got.values()) == sum(by for _, by in incs)
    firsts = list(dict.fromkeys(key for key, _ in incs))
    kept = firsts[:4]
    for key in kept:
        assert got[(("k", key),)] == sum(by for k, by in incs if k == key)
    if len(firsts) > 4:
        assert got[(("k", OVERFLOW),)] == sum(by for k, by in incs if k not in kept)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["node", "instance"]),
            st.floats(min_value=0, max_value=200, allow_nan=False),
        ),
        max_size=60,
    )
)
def test_histogram_buckets_count_each_observation_at_or_below_their_bound(observations):
    reg = Registry("wconfd")
    hist = reg.histogram("lockwarden_lock_wait_seconds")
    for level, value in observations:
        hist.observe(value, level)
    snap = reg.snapshot()
    buckets = snap["lockwarden_lock_wait_seconds_bucket"]
    sums = as_dict(snap["lockwarden_lock_wait_seconds_sum"])
    counts = as_dict(snap["lockwarden_lock_wait_seconds_count"])
    for level in {lv for lv, _ in observations}:
        mine = [v for lv, v in observations if lv == level]
        series = [(b["le"], n) for b, n in buckets if b["level"] == level]
        assert [le for le, _ in series][-1] == "+Inf"
        for le, n in series:
            assert n == sum(1 for v in mine if v <= float(le))
        assert counts[(("level", level),)] == len(mine)
        assert math.isclose(sums[(("level", level),)], sum(mine), abs_tol=1e-6)


def test_gauges_go_up_down_and_away():
    reg = Registry("luxid")
    jobs = reg.gauge("lockwarden_jobs")
    jobs.inc("queued", by=3)
    jobs.inc("queued", by=-1)
    jobs.set(5, "running")
    got = as_dict(reg.snapshot()["lockwarden_jobs"])
    assert got[(("status", "queued"),)] == 2 and got[(("status", "running"),)] == 5
    remaining = reg.gauge("lockwarden_drain_remaining")
    remaining.set(7, "node/n1")
    remaining.remove("node/n1")
    assert reg.snapshot()["lockwarden_drain_remaining"] == []


class Refused(Exception):
    pass


async def _handler(conn: Any, *args: Any, **kwargs: Any) -> Any:
    if kwargs.get("fail") == "rpc":
        raise errors.NotFound("no such job")
    if kwargs.get("fail") == "other":
        raise Refused("x")
    if kwargs.get("fail") == "hang":
        await asyncio.sleep(60)
    return "done"


def test_instrument_counts_each_call_by_method_and_outcome_and_times_it():
    reg = Registry("luxid")
    table = instrument({"query_jobs": _handler, "cancel_job": _handler}, reg)

    async def workload() -> None:
        for _ in range(3):
            assert await table["query_jobs"](None) == "done"
        with pytest.raises(errors.NotFound):
            await table["cancel_job"](None, fail="rpc")
        with pytest.raises(Refused):
            await table["cancel_job"](None, fail="other")
        task = asyncio.ensure_future(table["cancel_job"](None, fail="hang"))
        await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(workload())
    snap = reg.snapshot()
    counts = Tally(
        {
            (lab["method"], lab["outcome"]): n
            for lab, n in snap["lockwarden_rpc_requests_total"]
            if lab["daemon"] == "luxid"
        }
    )
    assert counts == {
        ("query_jobs", "ok"): 3,
        ("cancel_job", "NotFound"): 1,
        ("cancel_job", "Refused"): 1,
        ("cancel_job", "abandoned"): 1,
    }
    timed = as_dict(snap["lockwarden_rpc_seconds_count"])
    assert timed == {
        (("daemon", "luxid"), ("method", "query_jobs")): 3,
        (("daemon", "luxid"), ("method", "cancel_job")): 3,
    }


@pytest.mark.parametrize("api", [WConfdApi, LuxiApi])
def test_get_metrics_is_declared_once_for_both_daemons(api):
    spec = api.methods()["get_metrics"]
    assert spec.param_names == () and not spec.options.identified
