"""Ganeti's instance operations over lw-rapi (docs/rapi-instances.md), against real daemons:
Ganeti's own `GanetiRapiClient`, unchanged, creates, migrates, fails over, shuts down,
starts and deletes instances and follows their jobs, and the configuration shows each
effect; plain HTTP checks the 400s (each saying what was wrong and what to send), the 404s
for unknown instances, the write right, the feature list, the OpenAPI document and
changing a job's priority (a resource Ganeti's client has no method for).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from ganeti_testlib import Ganeti
from ganeti_testlib import ganeti as ganeti  # the fixture: Ganeti's RAPI client
from luxid_testlib import Stack
from test_drains_node import add_node
from test_jobproc_opcodes import run as ok
from test_rapi import READER, Rapi, assert_error
from test_rapi import rapi as rapi  # the fixture: lw-rapi on the stack
from test_rapi import stack as stack  # the fixture: wconfd + luxid, with RAPI users

pytestmark = pytest.mark.timeout(180)

# The body Ganeti's CreateInstance sends, with fields Lockwarden ignores (os, hypervisor,
# what the NICs hold, the disks' vg).
CREATE = {
    "__version__": 1,
    "mode": "create",
    "name": "vm1",
    "disk_template": "plain",
    "disks": [{"size": 1024, "vg": "xenvg"}],
    "nics": [{"link": "br0", "mode": "bridged"}],
    "beparams": {"maxmem": 512, "vcpus": 2},
    "os": "debootstrap+default",
    "hypervisor": "kvm",
}
INSTANCE_OPS = (
    ("DELETE", ""),
    ("PUT", "/migrate"),
    ("PUT", "/failover"),
    ("PUT", "/shutdown"),
    ("PUT", "/startup"),
)


def instance(stack: Stack, name: str) -> dict[str, Any] | None:
    """The instance as wconfd has it, its primary node by name; None if there is none."""
    nodes = {n["uuid"]: n["name"] for n in stack.wc.list_objects(kind="node")}
    for inst in stack.wc.list_objects(kind="instance"):
        if inst["name"] == name:
            return {**inst, "pnode": nodes[inst["primary_node"]]}
    return None


def succeeded(stack: Stack, answer: dict[str, Any]) -> int:
    """The job id a Ganeti client call answered, once that job succeeded."""
    assert "ok" in answer and isinstance(answer["ok"], int), answer
    job_id: int = answer["ok"]
    assert stack.wait_final(job_id) == "success", stack.field(job_id, "opresult")
    return job_id


# -- Ganeti's own client -----------------------------------------------------------------------


def test_ganeti_client_drives_an_instance_through_its_life(ganeti: Ganeti, stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"), add_node("n3", mtotal=1024))
    body = {k: v for k, v in CREATE.items() if k not in ("__version__", "mode", "name")}
    args = [body.pop(k) for k in ("disk_template", "disks", "nics")]
    features, created, placed = ganeti(
        ("GetFeatures", [], {}),
        ("CreateInstance", ["create", "vm1", *args], {**body, "pnode": "n1", "reason": "web"}),
        ("CreateInstance", ["create", "vm2", "sharedfile", [{"size": 10}], []],
         {"beparams": {"memory": 256}}),
    )  # fmt: skip
    assert "instance-create-reqv1" in features["ok"]
    job = succeeded(stack, created)
    succeeded(stack, placed)
    vm1 = instance(stack, "vm1")
    assert vm1 is not None and vm1["pnode"] == "n1" and vm1["admin_state"] == "up"
    assert (vm1["memory"], vm1["vcpus"], len(vm1["nics"])) == (512, 2, 1)
    assert [d["size"] for d in vm1["disks"]] == [1024]
    vm2 = instance(stack, "vm2")  # no pnode: placed by room (the most free memory)
    assert vm2 is not None and vm2["pnode"] == "n2" and vm2["memory"] == 256
    (op,) = stack.field(job, "ops")
    assert [e[:2] for e in op["reason"][:2]] == [
        ["gnt:user", "web"],
        ["gnt:library:rlib2:instances", ""],
    ]

    status, change = ganeti(
        ("GetJobStatus", [job], {}),
        ("WaitForJobChange", [job, ["status", "opstatus"], None, None], {}),
    )
    assert status["ok"]["status"] == "success" and status["ok"]["id"] == job
    assert change["ok"]["job_info"] == ["success", ["success"]]

    (migrated,) = ganeti(("MigrateInstance", ["vm1"], {"mode": "live", "target_node": "n2"}))
    succeeded(stack, migrated)
    assert instance(stack, "vm1")["pnode"] == "n2"  # type: ignore[index]
    (failed_over,) = ganeti(("FailoverInstance", ["vm1"], {"target_node": "n3"}))
    succeeded(stack, failed_over)
    assert instance(stack, "vm1")["pnode"] == "n3"  # type: ignore[index]
    (migrated,) = ganeti(("MigrateInstance", ["vm1"], {}))  # no target: placement
    succeeded(stack, migrated)
    assert instance(stack, "vm1")["pnode"] in ("n1", "n2")  # type: ignore[index]

    (down,) = ganeti(("ShutdownInstance", ["vm1"], {"timeout": 30}))
    succeeded(stack, down)
    assert instance(stack, "vm1")["admin_state"] == "down"  # type: ignore[index]
    (up,) = ganeti(("StartupInstance", ["vm1"], {}))
    succeeded(stack, up)
    assert instance(stack, "vm1")["admin_state"] == "up"  # type: ignore[index]
    (deleted,) = ganeti(("DeleteInstance", ["vm1"], {}))
    succeeded(stack, deleted)
    assert instance(stack, "vm1") is None and instance(stack, "vm2") is not None


def test_ganeti_client_gets_its_errors(ganeti: Ganeti, stack: Stack) -> None:
    ok(stack, add_node("n1"))
    answers = ganeti(
        ("MigrateInstance", ["nope"], {}),
        ("FailoverInstance", ["nope"], {}),
        ("ShutdownInstance", ["nope"], {}),
        ("StartupInstance", ["nope"], {}),
        ("DeleteInstance", ["nope"], {}),
        ("CreateInstance", ["import", "vm1", "plain", [{"size": 1}], []], {}),
        ("CreateInstance", ["create", "vm1", "plain", [{"size": 1}], []], {"dry_run": True}),
        ("MigrateInstance", ["nope"], {"mode": "teleport"}),
    )
    assert [a["error"] for a in answers] == [404] * 5 + [400] * 3, answers
    assert "instance 'nope' not found" in answers[0]["message"]
    assert "'import' is not supported" in answers[5]["message"]
    assert "dry-run is not supported" in answers[6]["message"]
    assert stack.lc.query_jobs(ids=None, fields=["id"]) == [[1]]  # only the node's job


# -- plain HTTP ----------------------------------------------------------------------------------


def test_features_openapi_and_rights(rapi: Rapi, stack: Stack) -> None:
    assert rapi.get("/2/features") == ["instance-create-reqv1", "node-evac-res1"]
    doc = rapi.get("/openapi.json", user=None)
    paths = doc["paths"]
    assert set(paths["/2/instances"]) == {"get", "post"}
    assert set(paths["/2/instances/{name}"]) == {"get", "delete"}
    for action in ("migrate", "failover", "shutdown", "startup"):
        put = paths[f"/2/instances/{{name}}/{action}"]["put"]
        assert put["x-lockwarden-role"] == "instances" and "404" in put["responses"]
    assert paths["/2/jobs/{job_id}/priority"]["put"]["x-lockwarden-role"] == "jobs"
    assert doc["components"]["schemas"]["InstanceCreateBody"]["properties"]["__version__"] == {
        "const": 1
    }
    ok(stack, add_node("n1"))
    assert_error(
        rapi.call("POST", "/2/instances", CREATE, user=READER), 403, "needs role instances"
    )
    assert_error(rapi.call("PUT", "/2/instances/vm1/shutdown", {}, user=None), 401)
    assert_error(
        rapi.call("PUT", "/2/jobs/1/priority", {"priority": 1}, user=READER), 403, "needs role jobs"
    )


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (
            {"__version__": None},
            ["__version__ is missing", '"__version__": 1', "instance-create-reqv1"],
        ),
        ({"__version__": 0}, ["__version__ is 0", '"__version__": 1']),
        ({"mode": "import"}, ["'mode' parameter", "'import'", '"mode": "create"']),
        ({"disks": [{"size": "big"}]}, ["$.disks[0].size", "send such as"]),
        ({"disks": [{"mode": "rw"}]}, ["missing required field `size`", "$.disks[0]"]),
        ({"disks": [{"size": 0}]}, [">= 1", "$.disks[0].size"]),
        ({"nics": None}, ["missing required field `nics`"]),
        ({"beparams": {"vcpus": 2}}, ["memory is missing", '"maxmem"']),
        ({"beparams": {"maxmem": "1G"}}, ["$.beparams.maxmem"]),
        ({"pnode": "nowhere"}, ["'pnode' parameter", "'nowhere' not found", "leave 'pnode' out"]),
        ({"name": 7}, ["$.name"]),
    ],
)
def test_create_400s_say_what_to_send(
    rapi: Rapi, stack: Stack, change: dict[str, Any], words: list[str]
) -> None:
    body = {k: v for k, v in {**CREATE, **change}.items() if v is not None}
    assert_error(rapi.call("POST", "/2/instances", body), 400, *words)


def test_create_body_forms(rapi: Rapi, stack: Stack) -> None:
    ok(stack, add_node("n1"))
    assert_error(rapi.call("POST", "/2/instances", [CREATE]), 400, "JSON object", "__version__")
    assert_error(rapi.call("POST", "/2/instances?dry-run=1", CREATE), 400, "dry-run")
    # start: false creates the instance down (a shutdown follows the creation in its job)
    job = rapi.call("POST", "/2/instances", {**CREATE, "start": False}).body
    assert isinstance(job, int) and stack.wait_final(job) == "success"
    assert [op["OP_ID"] for op in stack.field(job, "ops")] == [
        "OP_INSTANCE_CREATE",
        "OP_INSTANCE_SHUTDOWN",
    ]
    assert instance(stack, "vm1")["admin_state"] == "down"  # type: ignore[index]
    # the job fails (not the request) when the instance already exists
    again = rapi.call("POST", "/2/instances", CREATE).body
    assert stack.wait_final(again) == "error"
    assert "already exists" in str(stack.field(again, "opresult"))


def test_instance_operation_errors(rapi: Rapi, stack: Stack) -> None:
    ok(stack, add_node("n1"))
    for method, action in INSTANCE_OPS:
        assert_error(rapi.call(method, f"/2/instances/nope{action}", {}), 404, "'nope' not found")
    ok(stack, {"OP_ID": "OP_INSTANCE_CREATE", "instance_name": "vm1", "memory": 64,
               "vcpus": 1, "disks": [], "pnode": "n1"})  # fmt: skip
    cases = [
        ("PUT", "/migrate", {"mode": "teleport"}, ["'mode' parameter", "live, non-live"]),
        ("PUT", "/migrate", {"cleanup": True}, ["'cleanup' parameter", "send no cleanup"]),
        ("PUT", "/migrate", {"target_node": 3}, ["'target_node' parameter"]),
        ("PUT", "/failover", {"live": True}, ["doesn't support the parameter 'live'"]),
        ("PUT", "/shutdown?no_remember=1", {}, ["no_remember is not supported"]),
        ("PUT", "/startup?dry-run=1", None, ["dry-run is not supported"]),
        ("PUT", "/startup", {"force": "yes"}, ["'force' parameter"]),
        ("DELETE", "", {"ignore_failures": 1}, ["'ignore_failures' parameter"]),
        ("DELETE", "", [], ["not a dictionary"]),
    ]
    for method, action, body, words in cases:
        answer = rapi.call(method, f"/2/instances/vm1{action}", body)
        assert_error(answer, 400, *words)
    # a target that is no node: the job fails, as Ganeti's opcode does
    job = rapi.call("PUT", "/2/instances/vm1/migrate", {"target_node": "nowhere"}).body
    assert stack.wait_final(job) == "error"
    assert instance(stack, "vm1")["pnode"] == "n1"  # type: ignore[index]


def test_job_priority(rapi: Rapi, stack: Stack) -> None:
    paused = rapi.call("POST", "/2/filters", {"predicates": [], "action": "PAUSE"}).body
    job = stack.submit({"OP_ID": "OP_TEST_DELAY", "duration": 0})
    assert rapi.call("PUT", f"/2/jobs/{job}/priority", {"priority": -5}).body == job
    assert rapi.get(f"/2/jobs/{job}")["priority"] == -5
    for body, words in [
        ({}, ["'priority' is missing", '{"priority": n}']),
        ({"priority": 20}, ["-20…19", "got 20"]),
        ({"priority": "1"}, ["'priority' parameter"]),
        ({"priority": 1, "when": "now"}, ["doesn't support the parameter 'when'"]),
    ]:
        assert_error(rapi.call("PUT", f"/2/jobs/{job}/priority", body), 400, *words)
    assert_error(rapi.call("PUT", "/2/jobs/999/priority", {"priority": 1}), 404)
    assert_error(rapi.call("PUT", "/2/jobs/x/priority", {"priority": 1}), 400, "job id")
    assert rapi.call("DELETE", f"/2/filters/{paused}").status == 200
    assert stack.wait_final(job) == "success"
    # A finished job keeps its priority: 409 with luxid's reason.
    assert_error(rapi.call("PUT", f"/2/jobs/{job}/priority", {"priority": 1}), 409, "finished")
