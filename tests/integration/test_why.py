"""Why a job waits (docs/contracts.md#why-a-job-waits) against real daemons: luxid's
why_job and wconfd's lock_waits compared with JSON literals, for each kind of link — two
levels of locks (a job waiting for a job that waits for a lock the test holds), a PAUSE
rule, a RATE_LIMIT rule and a reason bucket, the slots, a dependency on a held job, the
queue drain — and unknown jobs; then `lw job why` and `GET /2/jobs/<id>/why`.
"""

from __future__ import annotations

import re
import sys
import time
from pathlib import Path
from typing import Any

import msgspec
import pytest

from client import WConfdClient, errors

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack, delay, raises
from test_cli import Lw
from test_rapi import ADMIN, Rapi, write_users

pytestmark = pytest.mark.timeout(120)

LONG = 60.0  # a delay that outlives the test (its job is killed at the end)


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def why(stack: Stack, job_id: int) -> dict[str, Any]:
    """why_job's answer as JSON (what an outside client compares)."""
    return msgspec.to_builtins(stack.lc.why_job(job_id=job_id))


def why_until(stack: Stack, job_id: int, kinds: list[str]) -> dict[str, Any]:
    """why_job once its chain has Steps of these kinds (a pass or a lock wait may still be
    on its way when the test asks first)."""
    answer: dict[str, Any] = {}

    def matches() -> bool:
        nonlocal answer
        answer = why(stack, job_id)
        return [step["kind"] for step in answer["chain"]] == kinds

    stack.until(matches, timeout=15)
    return answer


def add_rule(stack: Stack, action: Any, predicates: Any = ()) -> str:
    return str(
        stack.lc.replace_filter(
            uuid=None, priority=0, predicates=list(predicates), action=action, reason=[]
        )
    )


def only_job(job_id: int) -> list[Any]:
    return [["jobid", ["==", "id", job_id]]]


# -- locks -----------------------------------------------------------------------------------


def replace_disks(name: str) -> dict[str, Any]:
    return {"OP_ID": "OP_INSTANCE_REPLACE_DISKS", "instance_name": name,
            "mode": "replace_on_primary", "duration": 0}  # fmt: skip


def test_a_job_waiting_for_a_job_that_waits_for_a_lock_the_test_holds(stack, daemon_factory):
    stack.add_nodes("n1", "n2")
    made = stack.submit({"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "web1", "memory": 64,
                         "vcpus": 1, "disks": [{"size": 1}], "pnode": "n1"})  # fmt: skip
    assert stack.wait_final(made) == "success"
    holder = WConfdClient(stack.wconfd.socket, name="holder")
    assert holder.try_update_locks([["node/n1", "exclusive"]]) == []
    holder_id = holder.client_id
    granted = time.time()
    first = stack.submit(replace_disks("web1"))  # holds instance/web1, waits for node/n1
    stack.wait_status(first, "waiting")
    stack.until(lambda: any(w.job_id == first for w in stack.wc.lock_waits()))
    second = stack.submit(replace_disks("web1"))  # waits for instance/web1, held by `first`
    answer = why_until(stack, second, ["lock", "lock"])

    # wconfd's own answer, entry by entry.
    waits = msgspec.to_builtins(stack.wc.lock_waits())
    by_job = {w["job_id"]: w for w in waits}
    assert set(by_job) == {first, second}
    node_wait = by_job[first]
    assert node_wait["owner"].startswith(f"job-{first}:")
    assert (node_wait["lock"], node_wait["mode"]) == ("node/n1", "exclusive")
    (held,) = node_wait["held_by"]
    assert held["owner"] == holder_id and held["job_id"] is None
    assert held["mode"] == "exclusive" and abs(held["since"] - granted) < 5
    assert set(node_wait) == {"owner", "job_id", "lock", "mode", "since", "held_by"}
    inst_wait = by_job[second]
    assert (inst_wait["lock"], inst_wait["mode"]) == ("instance/web1", "exclusive")
    assert [h["job_id"] for h in inst_wait["held_by"]] == [first]
    assert inst_wait["held_by"][0]["owner"] == node_wait["owner"]

    # luxid's chain: the instance lock held by `first`, then the node lock held by the test.
    assert answer["job_id"] == second and answer["status"] == "waiting"
    step1, step2 = answer["chain"]
    assert {k: v for k, v in step1.items() if k != "text"} == {
        "kind": "lock", "lock": "instance/web1", "mode": "exclusive",
        "held_by": inst_wait["held_by"],
    }  # fmt: skip
    assert step1["text"].startswith(
        f"job {first} (waiting OP_INSTANCE_REPLACE_DISKS web1 for "
    ) and step1["text"].endswith(" s) holds instance/web1 exclusive")
    assert {k: v for k, v in step2.items() if k != "text"} == {
        "kind": "lock", "lock": "node/n1", "mode": "exclusive", "held_by": node_wait["held_by"],
    }  # fmt: skip
    assert step2["text"].startswith(f"client {holder_id} holds node/n1 exclusive (for ")
    assert why(stack, first)["chain"] == [step2]

    # `lw job why`: each Step's text, indented two spaces per link.
    lw = Lw(stack.luxid.run_dir, stack.luxid.state_dir)
    out = lw.ok("job", "why", str(second))
    texts = [step["text"] for step in why(stack, second)["chain"]]
    # The same lines but for how long each has waited or held: a second may pass between.
    assert [_no_age(line) for line in out.splitlines()] == [
        _no_age(texts[0]),
        "  " + _no_age(texts[1]),
    ]

    # The test lets go: both jobs run, and nothing holds them any more.
    holder.free_locks()
    assert stack.wait_final(first) == "success" and stack.wait_final(second) == "success"
    assert why(stack, second) == {"job_id": second, "status": "success", "chain": []}
    assert stack.wc.lock_waits() == []
    holder.close()


# -- filters, rate limits, slots -------------------------------------------------------------


def test_a_pause_rule(stack):
    job_id = stack.submit(delay())
    # The rule is added after the job, so it names the job: the watermark alone would not.
    uuid = add_rule(stack, "PAUSE", only_job(job_id + 1))
    held = stack.submit(delay())
    assert held == job_id + 1
    assert why_until(stack, held, ["filter"]) == {
        "job_id": held,
        "status": "queued",
        "chain": [
            {"kind": "filter", "text": f"paused by filter {uuid}", "uuid": uuid,
             "action": "PAUSE"},
        ],
    }  # fmt: skip
    stack.lc.delete_filter(uuid=uuid)
    assert stack.wait_final(held) == "success"


def test_a_full_rate_limit_rule_and_a_full_reason_bucket(stack):
    uuid = add_rule(stack, ["RATE_LIMIT", 1], [["opcode", ["=", "OP_ID", "OP_TEST_DELAY"]]])
    running = stack.submit(delay(LONG))
    stack.wait_status(running, "running")
    held = stack.submit(delay())
    assert why_until(stack, held, ["rate_limit"])["chain"] == [
        {"kind": "rate_limit",
         "text": f"rate-limited by filter {uuid}: 1 of 1 running (jobs {running})",
         "bucket": f"filter/{uuid}", "limit": 1, "running": [running]},
    ]  # fmt: skip
    stack.lc.delete_filter(uuid=uuid)
    assert stack.wait_final(held) == "success"

    reason = [["test", "rate-limit:1:backup", 1]]
    bucket_runner = stack.submit(delay(LONG, reason=reason))
    stack.wait_status(bucket_runner, "running")
    in_bucket = stack.submit(delay(reason=reason))
    assert why_until(stack, in_bucket, ["rate_limit"])["chain"] == [
        {"kind": "rate_limit",
         "text": f"rate-limit bucket 1:backup full: 1 of 1 running (jobs {bucket_runner})",
         "bucket": "1:backup", "limit": 1, "running": [bucket_runner]},
    ]  # fmt: skip


def test_full_slots(stack):
    stack.set_cluster(max_running_jobs=1)
    stack.until(lambda: stack.lc.query_queue_info().max_running_jobs == 1)
    running = stack.submit(delay(LONG))
    stack.wait_status(running, "running")
    held = stack.submit(delay())
    assert why_until(stack, held, ["slots"]) == {
        "job_id": held,
        "status": "queued",
        "chain": [
            {"kind": "slots", "text": "max running jobs reached: 1 of 1 running",
             "running": 1, "max_running_jobs": 1},
        ],
    }  # fmt: skip
    assert why(stack, running) == {"job_id": running, "status": "running", "chain": []}


def test_a_dependency_on_a_held_job_goes_on_with_its_chain(stack):
    first = stack.submit(delay())
    uuid = add_rule(stack, "PAUSE", only_job(first + 1))
    paused = stack.submit(delay())
    dependent = stack.submit(delay(depends=[[paused, []]]))
    answer = why_until(stack, dependent, ["dependency", "filter"])
    step, rule = answer["chain"]
    assert {k: v for k, v in step.items() if k != "text"} == {
        "kind": "dependency", "job_id": paused, "status": "queued",
    }  # fmt: skip
    assert step["text"].startswith(f"waiting for job {paused} (queued OP_TEST_DELAY 0.0 for ")
    assert rule == {"kind": "filter", "text": f"paused by filter {uuid}", "uuid": uuid,
                    "action": "PAUSE"}  # fmt: skip
    stack.lc.delete_filter(uuid=uuid)
    assert stack.wait_final(dependent) == "success"


def test_a_soft_queue_drain(stack):
    stack.lc.drain_queue(mode="soft", deadline=None, message="maintenance")
    uuid = stack.until(lambda: stack.lc.query_filters(fields=["uuid"]))[0][0]
    held = stack.submit(delay())
    assert why_until(stack, held, ["drain_flag"])["chain"] == [
        {"kind": "drain_flag",
         "text": f"held by the soft queue drain (filter {uuid}) until undrained",
         "target": "queue", "mode": "soft"},
    ]  # fmt: skip
    stack.lc.undrain_queue()
    assert stack.wait_final(held) == "success"


# -- unknown jobs, the CLI and the RAPI --------------------------------------------------------


def test_unknown_jobs_are_not_found_everywhere(stack, daemon_factory):
    raises(errors.NotFound, stack.lc.why_job, job_id=4242)
    lw = Lw(stack.luxid.run_dir, stack.luxid.state_dir)
    assert "no job 4242" in lw.fails(1, "job", "why", "4242")
    done = stack.submit(delay())
    assert stack.wait_final(done) == "success"
    done_out = lw(*("job", "why", str(done)))
    assert done_out.returncode == 0 and done_out.stdout == ""
    assert "nothing holds it" in done_out.stderr


def test_the_rapi_answers_the_whole_why_job_object(stack, daemon_factory):
    write_users(stack.wconfd.state_dir, (*ADMIN, True))
    rapi = Rapi(daemon_factory)
    stack.set_cluster(max_running_jobs=1)
    stack.until(lambda: stack.lc.query_queue_info().max_running_jobs == 1)
    running = stack.submit(delay(LONG))
    stack.wait_status(running, "running")
    held = stack.submit(delay())
    expected = why_until(stack, held, ["slots"])
    assert rapi.get(f"/2/jobs/{held}/why") == expected
    missing = rapi.call("GET", "/2/jobs/4242/why")
    assert missing.status == 404 and "4242" in missing.body["explain"]
    assert rapi.call("GET", "/2/jobs/0/why").status == 400


def _no_age(text: str) -> str:
    """A Step's text without its durations ("for 3 s")."""
    return re.sub(r"\bfor \d+ s\b", "for N s", text)
