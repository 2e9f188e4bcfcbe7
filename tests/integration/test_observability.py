"""The metrics (docs/contracts.md#observability) against real daemons: `GET /metrics` parsed with
prometheus_client's own parser (names, help, types, label sets; the RPC counters after a scripted
workload), its authentication, and the `/ui/` dashboard in headless Chromium (live data, then a job
submitted afterwards appearing without a reload; screenshots at 1280x800 and phone size).
"""

# ruff: noqa: F811  (tests take test_rapi's `stack` fixture, imported above them)
from __future__ import annotations

import asyncio
import base64
import json
import sys
import time
import urllib.request
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.openmetrics.parser import (
    text_string_to_metric_families as openmetrics_families,
)
from prometheus_client.parser import text_string_to_metric_families

sys.path.insert(0, str(Path(__file__).parent))
from browser_testlib import Browser, chromium_path
from luxid_testlib import delay, kill9
from test_cli import Lw
from test_rapi import READER, Rapi, stack  # noqa: F401  (test_rapi's stack fixture, reused)

from client import LuxiClient, WConfdClient, errors
from client.metrics import BY_NAME, CATALOGUE
from rapi.dashboard import live

pytestmark = pytest.mark.timeout(120)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(rapi: Rapi, user: tuple[str, str] | None = READER) -> tuple[dict[str, Any], Samples]:
    """The families by name and every sample keyed by (name, sorted labels)."""
    answer = rapi.call("GET", "/metrics", user=user)
    assert answer.status == 200, answer
    assert answer.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    families = {f.name: f for f in text_string_to_metric_families(answer.raw)}
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families.values()
        for s in f.samples
    }
    return families, samples


def rpc_counts(samples: Samples) -> Counter[tuple[str, str, str]]:
    out: Counter[tuple[str, str, str]] = Counter()
    for (name, labels), value in samples.items():
        if name == "lockwarden_rpc_requests_total":
            lab = dict(labels)
            out[lab["daemon"], lab["method"], lab["outcome"]] = int(value)
    return out


def test_metrics_have_every_spec_name_with_help_type_and_bounded_labels(
    stack: Any, daemon_factory: Any
) -> None:
    rapi = Rapi(daemon_factory)
    families, samples = scrape(rapi)
    for defn in CATALOGUE:
        family_name = defn.name.removesuffix("_total") if defn.kind == "counter" else defn.name
        family = families[family_name]
        assert family.type == defn.kind and family.documentation == defn.help
        for sample in family.samples:
            assert set(sample.labels) - {"le"} == set(defn.labels), sample
    for _, labels in samples:
        assert not {"job", "job_id", "client", "client_id"} & {k for k, _ in labels}
    # Zero until something happens, and both daemons reached.
    assert samples["lockwarden_jobs_submitted_total", ()] == 0
    assert samples["lockwarden_up", (("daemon", "luxid"),)] == 1
    assert samples["lockwarden_up", (("daemon", "wconfd"),)] == 1
    assert samples["lockwarden_journal_flush_seconds_count", ()] == 0


def test_rpc_counters_say_exactly_what_happened(stack: Any, daemon_factory: Any) -> None:
    rapi = Rapi(daemon_factory)
    _, before = scrape(rapi)
    with LuxiClient(stack.luxid.socket) as lc, WConfdClient(stack.wconfd.socket, name="t") as wc:
        # Not ping: on etcd, wconfd pings its luxid every half second (left out below).
        for _ in range(7):
            lc.query_filters(uuids=None, fields=["uuid"])
        for _ in range(3):
            lc.query_queue_info()
        with pytest.raises(errors.NotFound):
            lc.cancel_job(job_id=999_999)
        with pytest.raises(errors.InvalidOpcode):
            lc.submit_job(ops=[{"OP_ID": "OP_NO_SUCH_THING"}])
        for _ in range(4):
            wc.get_config()
        wc.update_locks_waiting([["node/n1", "exclusive"]], timeout=5)
        with pytest.raises(errors.LockOrderError):
            wc.try_update_locks([["cluster/BGL", "exclusive"]])
        wc.free_locks()
    _, after = scrape(rapi)
    # On etcd the daemons watch each other: wconfd pings its luxid, luxid asks its role.
    watches = {("luxid", "ping"), ("wconfd", "get_role")}
    delta = Counter(
        {k: v for k, v in (rpc_counts(after) - rpc_counts(before)).items() if k[:2] not in watches}
    )
    assert {k: v for k, v in delta.items() if k[0] == "luxid"} == {
        ("luxid", "query_filters", "ok"): 7,
        ("luxid", "query_queue_info", "ok"): 3,
        ("luxid", "cancel_job", "NotFound"): 1,
        ("luxid", "submit_job", "InvalidOpcode"): 1,
        ("luxid", "get_metrics", "ok"): 1,  # the first scrape's
    }
    wconfd = {k: v for k, v in delta.items() if k[0] == "wconfd"}
    assert wconfd == {
        ("wconfd", "identify", "ok"): 1,
        ("wconfd", "get_config", "ok"): 4,
        ("wconfd", "update_locks_waiting", "ok"): 1,
        ("wconfd", "try_update_locks", "LockOrderError"): 1,
        ("wconfd", "free_locks", "ok"): 1,
        ("wconfd", "get_metrics", "ok"): 1,
    }
    # Each answered call is also timed, once, in a cumulative histogram.
    for daemon, method, _ in delta:
        labels = (("daemon", daemon), ("method", method))
        calls = sum(n for (d, m, _), n in rpc_counts(after).items() if (d, m) == (daemon, method))
        assert after["lockwarden_rpc_seconds_count", labels] == calls
        assert (
            after["lockwarden_rpc_seconds_bucket", (*labels[:1], ("le", "+Inf"), labels[1])]
            == calls
        )


def test_openmetrics_when_the_scraper_asks_for_it(stack: Any, daemon_factory: Any) -> None:
    rapi = Rapi(daemon_factory)
    answer = rapi.call(
        "GET", "/metrics", user=READER,
        headers={"Accept": "application/openmetrics-text; version=1.0.0"},
    )  # fmt: skip
    assert answer.status == 200
    assert answer.headers["Content-Type"].startswith("application/openmetrics-text")
    families = {f.name: f for f in openmetrics_families(answer.raw)}
    assert families["lockwarden_jobs_submitted"].type == "counter"
    assert families["lockwarden_rpc_seconds"].type == "histogram"


def test_metrics_need_a_reader_unless_opened(stack: Any, daemon_factory: Any) -> None:
    rapi = Rapi(daemon_factory)
    assert rapi.call("GET", "/metrics", user=None).status == 401
    assert rapi.call("GET", "/metrics", user=("reader", "wrong")).status == 401
    assert rapi.call("GET", "/ui/", user=None).status == 401
    assert rapi.call("GET", "/ui/state", user=READER).status == 200
    opened = Rapi(daemon_factory, "--metrics-anonymous")
    scrape(opened, user=None)
    assert opened.call("GET", "/ui/state", user=None).status == 401
    assert opened.call("GET", "/2/info", user=None).status == 401


def test_a_daemon_that_cannot_be_read_shows_as_down_not_as_zero(
    stack: Any, daemon_factory: Any
) -> None:
    rapi = Rapi(daemon_factory)
    stack.lc.close()
    stack.luxid.stop()
    _, samples = scrape(rapi)
    assert samples["lockwarden_up", (("daemon", "luxid"),)] == 0
    assert samples["lockwarden_up", (("daemon", "wconfd"),)] == 1
    assert ("lockwarden_jobs_submitted_total", ()) not in samples
    assert samples["lockwarden_lock_requests_pending", ()] == 0


def test_lw_info_shows_the_metrics_url_while_rapi_runs(stack: Any, daemon_factory: Any) -> None:
    lw = Lw(stack.wconfd.run_dir, stack.wconfd.state_dir)
    assert lw.json("info", "-o", "metrics_url") == {"metrics_url": None}
    rapi = Rapi(daemon_factory)
    assert lw.json("info", "-o", "metrics_url") == {"metrics_url": f"{rapi.base}/metrics"}
    rapi.daemon.stop()
    assert lw.json("info", "-o", "metrics_url") == {"metrics_url": None}
    killed = Rapi(daemon_factory)
    killed.daemon.kill()  # a killed lw-rapi leaves its file behind: no URL all the same
    assert (stack.wconfd.run_dir / "rapi.json").exists()
    assert lw.json("info", "-o", "metrics_url") == {"metrics_url": None}


def test_the_event_stream_sends_a_snapshot_and_does_not_hold_up_a_stop(
    stack: Any, daemon_factory: Any
) -> None:
    rapi = Rapi(daemon_factory)
    token = base64.b64encode(f"{READER[0]}:{READER[1]}".encode()).decode()
    request = urllib.request.Request(
        f"{rapi.base}/ui/events", headers={"Authorization": f"Basic {token}"}
    )
    with urllib.request.urlopen(request, timeout=30) as stream:
        assert stream.headers["Content-Type"] == "text/event-stream"
        assert stream.readline() == b"event: snapshot\n"
        view = json.loads(stream.readline().removeprefix(b"data: "))
        assert view["cluster"]["name"] == "lockwarden" and view["queued_total"] == 0
        started = time.monotonic()
        assert rapi.daemon.stop() == 0
        assert time.monotonic() - started < 5, "an open stream held lw-rapi's stop up"


def test_change_serials_wake_their_waiters_at_the_change(stack: Any) -> None:
    """wait_queue_change and wait_locks_change are event-driven: a waiter is answered by
    the change itself (well before its timeout), and at the timeout with the same serial."""
    queue = stack.lc.wait_queue_change(since_serial=-1, timeout=0)
    assert stack.lc.wait_queue_change(since_serial=queue, timeout=0.2) == queue
    locks = stack.wc.wait_locks_change(since_serial=-1, timeout=0)
    assert stack.wc.wait_locks_change(since_serial=locks, timeout=0.2) == locks
    with (
        ThreadPoolExecutor(2) as pool,
        LuxiClient(stack.luxid.socket) as lc,
        WConfdClient(stack.wconfd.socket, name="watcher") as watcher,
        WConfdClient(stack.wconfd.socket, name="taker") as taker,
    ):
        started = time.monotonic()
        queue_wait = pool.submit(lc.wait_queue_change, since_serial=queue, timeout=60)
        locks_wait = pool.submit(watcher.wait_locks_change, since_serial=locks, timeout=60)
        stack.submit(delay(0))
        taker.try_update_locks([["node/watched", "exclusive"]])
        assert queue_wait.result(timeout=30) != queue
        assert locks_wait.result(timeout=30) != locks
        assert time.monotonic() - started < 30
        seen = stack.wc.wait_locks_change(since_serial=-1, timeout=0)
        taker.free_locks()
        assert stack.wc.wait_locks_change(since_serial=seen, timeout=30) != seen


def next_snapshot(stream: Any) -> dict[str, Any]:
    """The next `snapshot` event of an open /ui/events stream (comments skipped)."""
    while True:
        line = stream.readline()
        assert line, "the stream ended"
        if line == b"event: snapshot\n":
            return dict(json.loads(stream.readline().removeprefix(b"data: ")))


def test_the_event_stream_pushes_jobs_and_locks_as_they_change(
    stack: Any, daemon_factory: Any
) -> None:
    """No timer: a job submitted to a quiet queue and a lock taken outside any job each
    bring a snapshot long before the stream's keepalive would."""
    rapi = Rapi(daemon_factory)
    token = base64.b64encode(f"{READER[0]}:{READER[1]}".encode()).decode()
    request = urllib.request.Request(
        f"{rapi.base}/ui/events", headers={"Authorization": f"Basic {token}"}
    )
    bound = live.KEEPALIVE_SECONDS / 3

    def luxid_calls() -> Counter[str]:
        # Not counted: get_metrics (this), and ping, which wconfd sends its luxid every
        # 0.5 s on etcd to see it is not hung (docs/operations.md#stalls).
        calls = stack.lc.get_metrics()["lockwarden_rpc_requests_total"]
        return Counter(
            {
                labels["method"]: n
                for labels, n in calls
                if labels["method"] not in ("get_metrics", "ping")
            }
        )

    with urllib.request.urlopen(request, timeout=60) as stream:
        assert next_snapshot(stream)["queued_total"] == 0
        # While nothing happens the stream asks nothing: it waits (no timer re-reading).
        quiet = luxid_calls()
        time.sleep(1.5)
        assert luxid_calls() == quiet
        started = time.monotonic()
        job = stack.submit(delay(0))
        while not any(j["id"] == job for j in next_snapshot(stream)["recent"]):
            assert time.monotonic() - started < bound
        with WConfdClient(stack.wconfd.socket, name="operator") as wc:
            started = time.monotonic()
            wc.try_update_locks([["node/held-by-hand", "exclusive"]])
            while not any(
                lock["name"] == "node/held-by-hand" for lock in next_snapshot(stream)["locks"]
            ):
                assert time.monotonic() - started < bound
            wc.free_locks()


# -- the workload: what the daemons did, as counters, gauges and histograms ---------------


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def series(samples: Samples, name: str, label: str) -> dict[str, float]:
    """A metric's values by one label (the others summed)."""
    out: dict[str, float] = {}
    for (sample, labels), number in samples.items():
        if sample == name:
            key = dict(labels)[label]
            out[key] = out.get(key, 0.0) + number
    return out


def buckets(name: str, observations: list[float]) -> dict[str, float]:
    """The cumulative bucket counts these observations give, by `le` as exposed."""
    bounds = BY_NAME[name].buckets
    out = {repr(float(b)): float(sum(1 for o in observations if o <= b)) for b in bounds}
    return {**out, "+Inf": float(len(observations))}


def histogram_of(samples: Samples, name: str, **labels: str) -> tuple[dict[str, float], float]:
    """The cumulative buckets (by `le`) and the sum of one histogram series."""
    got = {
        dict(lab)["le"]: n
        for (sample, lab), n in samples.items()
        if sample == f"{name}_bucket" and {k: v for k, v in lab if k != "le"} == labels
    }
    return got, value(samples, f"{name}_sum", **labels)


def test_metrics_say_exactly_what_a_workload_did(stack: Any, daemon_factory: Any) -> None:
    """Jobs run, fail, are rejected at submit, paused and canceled; a job waits for a
    lock whose holder is killed; a deadlock is refused — and the metrics say so."""
    rapi = Rapi(daemon_factory)

    def rule(action: str, text: str | None, priority: int) -> None:
        predicates = [] if text is None else [["reason", ["=", "reason", text]]]
        stack.lc.replace_filter(uuid=None, priority=priority, predicates=predicates,
                                action=action, reason=[["test", "workload", 1]])  # fmt: skip

    def tagged(text: str) -> dict[str, Any]:
        return delay(0, reason=[["test", text, 1]])

    rule("REJECT", "reject me", 0)
    rule("PAUSE", "pause me", 0)
    rule("ACCEPT", None, 10)  # applies to every other job
    ok = stack.submit(delay(0))
    failed = stack.submit(delay(0, fail=True))
    rejected = [stack.submit(tagged("reject me")) for _ in range(2)]
    paused = stack.submit(tagged("pause me"))
    holder = stack.submit(delay(60, on_nodes=["n1"]))
    stack.wait_op_running(holder)
    waiter = stack.submit(delay(0, on_nodes=["n1"]))
    stack.wait_status(waiter, "waiting")
    assert stack.wait_final(ok) == "success" and stack.wait_final(failed) == "error"
    assert all(stack.status(j) == "canceled" for j in rejected)
    assert stack.field(paused, "pending_reason").startswith("paused by filter")

    # The job reports `waiting` before its waiting request reaches wconfd: wait for that.
    deadline = time.monotonic() + 10
    while value(during := scrape(rapi)[1], "lockwarden_lock_requests_pending") != 1:
        assert time.monotonic() < deadline, "the waiter's lock request never reached wconfd"
        time.sleep(0.02)
    assert series(during, "lockwarden_jobs", "status") == {
        "queued": 1, "waiting": 1, "running": 1, "canceling": 0,
        "success": 1, "error": 1, "canceled": 2,
    }  # fmt: skip
    assert value(during, "lockwarden_locks_held", level="node", mode="exclusive") == 1
    assert value(during, "lockwarden_lock_requests_pending") == 1

    seen_waiting = time.monotonic()
    kill9(stack.field(holder, "process_id"))
    killed = time.monotonic()
    assert stack.wait_final(holder) == "error" and stack.wait_final(waiter) == "success"
    assert stack.lc.cancel_job(job_id=paused)[0]

    # A deadlock refused: a and b share node/n2; a waits to upgrade, so b's upgrade would
    # close the cycle.  Then b lets go and a is granted.
    with (
        WConfdClient(stack.wconfd.socket, name="a") as a,
        WConfdClient(stack.wconfd.socket, name="b") as b,
        ThreadPoolExecutor(1) as pool,
    ):
        a.try_update_locks([["node/n2", "shared"]])
        b.try_update_locks([["node/n2", "shared"]])
        sent = time.monotonic()
        upgrade = pool.submit(a.update_locks_waiting, [["node/n2", "exclusive"]], timeout=30)
        stack.until(lambda: [p.client_id for p in stack.wc.list_all_locks().pending] != [])
        pending_seen = time.monotonic()
        _, blocked = scrape(rapi)
        assert value(blocked, "lockwarden_locks_held", level="node", mode="shared") == 2
        assert value(blocked, "lockwarden_lock_requests_pending") == 1
        with pytest.raises(errors.DeadlockError):
            b.update_locks_waiting([["node/n2", "exclusive"]], timeout=30)
        freed = time.monotonic()
        b.free_locks()
        assert upgrade.result(timeout=30).granted
        answered = time.monotonic()
        a.free_locks()
    assert stack.lc.archive_job(job_id=ok)

    _, after = scrape(rapi)
    assert value(after, "lockwarden_jobs_submitted_total") == 7
    assert series(after, "lockwarden_jobs_finished_total", "status") == {
        "success": 2, "error": 2, "canceled": 3,
    }  # fmt: skip
    assert series(after, "lockwarden_jobs", "status") == {  # `ok` was archived
        "queued": 0, "waiting": 0, "running": 0, "canceling": 0,
        "success": 1, "error": 2, "canceled": 3,
    }  # fmt: skip
    # Each job's verdict once, however many scheduling passes judged it.
    assert series(after, "lockwarden_filter_verdicts_total", "action") == {
        "ACCEPT": 4, "PAUSE": 1, "REJECT": 2, "CONTINUE": 0, "RATE_LIMIT": 0,
    }  # fmt: skip
    # The job histograms hold exactly the jobs' own timestamps (rejected and paused jobs
    # never started: they have no queue or run time).
    started = [ok, failed, holder, waiter]
    rows = stack.lc.query_jobs(ids=started, fields=["received_ts", "start_ts", "end_ts"])
    queued_s = [start - received for received, start, _ in rows]
    run_s = [end - start for _, start, end in rows]
    for name, observed in (("lockwarden_job_queue_seconds", queued_s),
                           ("lockwarden_job_run_seconds", run_s)):  # fmt: skip
        got, total = histogram_of(after, name, opcode="OP_TEST_DELAY")
        assert got == buckets(name, observed), name
        assert total == pytest.approx(sum(observed), abs=1e-6), name
    # Two lock requests waited at level node: the job behind the killed holder, and a.
    waits, waited = histogram_of(after, "lockwarden_lock_wait_seconds", level="node")
    assert waits["+Inf"] == 2
    assert (killed - seen_waiting) + (freed - pending_seen) <= waited
    assert waited <= 60 + (answered - sent)
    assert value(after, "lockwarden_deadlocks_total") == 1
    assert value(after, "lockwarden_dead_clients_released_total") == 1  # the holder
    assert value(after, "lockwarden_lock_requests_pending") == 0
    assert set(series(after, "lockwarden_locks_held", "level").values()) == {0}
    flushes = value(after, "lockwarden_journal_flush_seconds_count")
    assert flushes >= 1 and value(after, "lockwarden_journal_flush_seconds_sum") > 0
    assert value(after, "lockwarden_journal_flush_seconds_bucket", le="+Inf") == flushes


# -- the dashboard in a real browser ------------------------------------------------------

needs_chromium = pytest.mark.skipif(
    chromium_path() is None,
    reason="no Chromium on this machine (Debian: apt-get install chromium); "
    "the dashboard test needs a real browser",
)
ROWS = "Array.from(document.querySelectorAll('#{0} tbody tr')).map(r => r.innerText)"


@needs_chromium
def test_dashboard_shows_live_data_and_updates_without_reload(
    stack: Any, daemon_factory: Any, tmp_path: Path
) -> None:
    stack.add_nodes("alpha", "beta")
    running = stack.submit(delay(300, on_nodes=["alpha"]))
    stack.wait_op_running(running)
    waiting = stack.submit(delay(1, on_nodes=["alpha"]))
    stack.wait_status(waiting, "waiting")
    stack.lc.replace_filter(
        uuid=None, priority=0, predicates=[["jobid", [">", "id", waiting]]],
        action="PAUSE", reason=[["test", "hold", 1]],
    )  # fmt: skip
    paused = stack.submit(delay(0))
    rapi = Rapi(daemon_factory)
    token = base64.b64encode(f"{READER[0]}:{READER[1]}".encode()).decode()

    async def drive() -> None:
        async with Browser(tmp_path / "chromium") as browser:
            await browser.send("Page.enable")
            await browser.send(  # what the Content-Security-Policy refuses, if anything
                "Page.addScriptToEvaluateOnNewDocument",
                source="window.cspViolations = []; document.addEventListener("
                "'securitypolicyviolation', e => window.cspViolations.push("
                "e.violatedDirective + ' ' + e.blockedURI))",
            )
            await browser.open(f"{rapi.base}/ui/", {"Authorization": f"Basic {token}"})
            await browser.wait_for(
                f"!!document.querySelector('#queued tr[data-job-id=\"{paused}\"]')"
            )
            assert await browser.evaluate("window.cspViolations") == []
            assert await browser.evaluate(
                "getComputedStyle(document.querySelector('#status-bar .seg')).flexGrow"
            ) not in ("", "0")
            await browser.evaluate("window.loadedOnce = true")
            nodes = await browser.evaluate(ROWS.format("nodes"))
            assert [row.split("\t")[0] for row in nodes] == ["alpha", "beta"]
            active = await browser.evaluate(ROWS.format("running"))
            assert any(row.startswith(str(running)) and "node/alpha" in row for row in active)
            assert any(row.startswith(str(waiting)) and "waiting" in row for row in active)
            queued = await browser.evaluate(ROWS.format("queued"))
            assert any(row.startswith(str(paused)) and "paused by filter" in row for row in queued)
            locks = await browser.evaluate(ROWS.format("locks"))
            assert any("node/alpha" in row and f"job {running}" in row for row in locks)
            assert await browser.evaluate("document.querySelector('#live').innerText") == "live"
            await browser.screenshot(tmp_path / "ui-phone.png", 390, 844, mobile=True)
            await browser.screenshot(tmp_path / "ui.png", 1280, 800)

            later = await asyncio.to_thread(stack.submit, delay(0))
            await browser.wait_for(
                f"!!document.querySelector('#queued tr[data-job-id=\"{later}\"]')"
            )
            assert await browser.evaluate("window.loadedOnce") is True  # no reload happened
            stack.lc.cancel_job(job_id=running, kill=True)
            await browser.wait_for(
                f"!!document.querySelector('#recent tr[data-job-id=\"{running}\"]')"
            )

    asyncio.run(drive())
    assert (tmp_path / "ui.png").stat().st_size > 10_000
    assert (tmp_path / "ui-phone.png").stat().st_size > 10_000
