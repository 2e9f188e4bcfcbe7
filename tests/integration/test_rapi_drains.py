"""lw-rapi's drain and node-role resources (docs/rapi-drains.md) against the real daemons:
`/2/nodes/<name>/drain` (GET, PUT, DELETE) and `/2/drains`, Ganeti's `/2/nodes/<name>/role`
and `/2/nodes/<name>/evacuate` (plain HTTP and Ganeti's own RAPI client over HTTPS), the
features list, the OpenAPI document, and their errors: 400 for bad bodies, 403 without the
write right, 404 for unknown nodes, 501 from a luxid that predates drains.
"""

from __future__ import annotations

import base64
import json
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from ganeti_testlib import Ganeti
from ganeti_testlib import ganeti as ganeti  # the fixture: Ganeti's RAPI client
from luxid_testlib import ADMIN_LOCKS, Stack
from test_drains_node import add_node, create
from test_drains_node import follow as follow_events
from test_jobproc_opcodes import run as ok
from test_rapi import READER, Rapi, assert_error, write_users
from test_rapi import rapi as rapi  # the fixture: lw-rapi on the stack
from test_rapi import stack as stack  # the fixture: wconfd + luxid, with RAPI users

from client import WConfdClient, errors
from client.api.luxi import DrainStatus

pytestmark = pytest.mark.timeout(180)

DRAIN_FIELDS = {
    "target", "status", "started_at", "updated_at", "deadline", "max_parallel", "mode",
    "message", "deadline_reached", "completed_at", "total", "remaining", "running",
    "blocked", "shut_down", "jobs", "start_at",
}  # fmt: skip


def placed(rapi: Rapi) -> dict[str, str]:
    """instance name -> primary node name, as the RAPI shows them."""
    return {i["name"]: i["pnode"] for i in rapi.get("/2/instances?bulk=1")}


def wait_job_tree(stack: Stack, job_id: int) -> list[int]:
    """Wait for a job to succeed and for the jobs it submitted (its first opcode's result,
    as OP_NODE_EVACUATE's) to succeed too; their ids."""
    assert stack.wait_final(job_id) == "success", stack.field(job_id, "opresult")
    children = [int(j) for j in stack.field(job_id, "opresult")[0]]
    for child in children:
        assert stack.wait_final(child) == "success", stack.field(child, "opresult")
    return children


# -- Ganeti's node role and evacuation over plain HTTP -----------------------------------------


def test_features_and_openapi_list_the_new_resources(rapi: Rapi) -> None:
    assert "node-evac-res1" in rapi.get("/2/features")
    paths = rapi.get("/openapi.json", user=None)["paths"]
    assert set(paths["/2/nodes/{name}/drain"]) == {"get", "put", "delete"}
    assert set(paths["/2/nodes/{name}/role"]) == {"get", "put"}
    assert set(paths["/2/nodes/{name}/evacuate"]) == {"post"}
    assert set(paths["/2/drains"]) == {"get"}
    assert set(paths["/2/nodes/{name}/drain/plan"]) == {"get"}
    schemas = rapi.get("/openapi.json", user=None)["components"]["schemas"]
    # start_at may be absent from a luxid that predates scheduled drains
    assert set(schemas["DrainStatus"]["required"]) == DRAIN_FIELDS - {"start_at"}
    assert set(schemas["DrainBody"]["properties"]) == {
        "deadline", "max_parallel", "priority", "message", "start_at"}  # fmt: skip
    put = paths["/2/nodes/{name}/drain"]["put"]
    assert put["x-lockwarden-access"] == "write" and "501" in put["responses"]


def test_node_roles_map_to_ganeti_flags(rapi: Rapi, stack: Stack) -> None:
    ok(stack, add_node("n1"))
    assert rapi.get("/2/nodes/n1/role") == "regular"
    expected = {
        "drained": (False, True, False),
        "master-candidate": (False, False, True),
        "offline": (True, False, False),
        "regular": (False, False, False),
    }
    for role in ("drained", "master-candidate", "offline", "drained", "regular"):
        answer = rapi.call("PUT", "/2/nodes/n1/role?reason=maintenance", role)
        assert answer.status == 200, answer
        job_id = answer.body
        assert isinstance(job_id, int)
        assert stack.wait_final(job_id) == "success", stack.field(job_id, "opresult")
        node = rapi.get("/2/nodes/n1")
        assert (node["offline"], node["drained"], node["master_candidate"]) == expected[role]
        assert rapi.get("/2/nodes/n1/role") == role
    (op,) = stack.field(job_id, "ops")
    assert op["OP_ID"] == "OP_NODE_SET_PARAMS" and op["node_name"] == "n1"
    sources = [entry[0] for entry in op["reason"]]
    assert sources[:2] == ["gnt:user", "gnt:library:rlib2:nodes_name_role"]
    assert op["reason"][0][1] == "maintenance"
    # by uuid, as every node resource
    uuid = rapi.get("/2/nodes/n1")["uuid"]
    assert rapi.get(f"/2/nodes/{uuid}/role") == "regular"


def test_node_role_and_evacuate_errors(rapi: Rapi, stack: Stack) -> None:
    ok(stack, add_node("n1"))
    assert_error(rapi.call("GET", "/2/nodes/nope/role"), 404, "nope")
    assert_error(rapi.call("PUT", "/2/nodes/nope/role", "drained"), 404, "nope")
    assert_error(rapi.call("PUT", "/2/nodes/n1/role", "master"), 400, "Can't set 'master' role")
    assert_error(rapi.call("PUT", "/2/nodes/n1/role", "sleepy"), 400, "sleepy", "regular")
    assert_error(rapi.call("PUT", "/2/nodes/n1/role", {"role": "drained"}), 400, "JSON string")
    assert_error(rapi.call("PUT", "/2/nodes/n1/role"), 400, "JSON string")
    assert_error(rapi.call("PUT", "/2/nodes/n1/role", "drained", user=READER), 403)

    assert_error(rapi.call("POST", "/2/nodes/nope/evacuate", {}), 404, "nope")
    assert_error(rapi.call("POST", "/2/nodes/n1/evacuate", {"remote_node": "n2"}), 400,
                 "remote_node")  # fmt: skip
    assert_error(rapi.call("POST", "/2/nodes/n1/evacuate", {"mode": "secondary-only"}), 400,
                 "secondary-only", "primary-only")  # fmt: skip
    assert_error(rapi.call("POST", "/2/nodes/n1/evacuate", {"mode": 3}), 400, "mode")
    assert_error(rapi.call("POST", "/2/nodes/n1/evacuate", {"early_release": "yes"}), 400,
                 "early_release")  # fmt: skip
    assert_error(rapi.call("POST", "/2/nodes/n1/evacuate", {"force": True}), 400, "force")
    assert_error(rapi.call("POST", "/2/nodes/n1/evacuate", ["n1"]), 400, "dictionary")
    assert_error(rapi.call("POST", "/2/nodes/n1/evacuate?dry-run=1", {}), 400, "dry-run")
    assert_error(rapi.call("POST", "/2/nodes/n1/evacuate", {}, user=READER), 403)
    assert rapi.get("/2/jobs") == [{"id": 1, "uri": "/2/jobs/1"}]  # only the node's addition


def test_evacuate_moves_the_primary_instances(rapi: Rapi, stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"), add_node("n3"))
    ok(stack, *(create(f"web{i}", 512, "n1") for i in range(3)), create("db", 512, "n2"))
    body = {"mode": "all", "iallocator": "hail", "early_release": True}
    answer = rapi.call("POST", "/2/nodes/n1/evacuate", body)
    assert answer.status == 200, answer
    moves = wait_job_tree(stack, answer.body)
    assert len(moves) == 3
    where = placed(rapi)
    assert where["db"] == "n2" and {where[f"web{i}"] for i in range(3)} <= {"n2", "n3"}
    assert rapi.get("/2/nodes/n1")["pinst_cnt"] == 0
    for move in moves:  # the migrations carry the evacuation's reason trail
        (op,) = stack.field(move, "ops")
        assert op["OP_ID"] == "OP_INSTANCE_MIGRATE"
        assert ["gnt:library:rlib2:nodes_name_evacuate", ""] in [e[:2] for e in op["reason"]]


# -- Ganeti's own client -----------------------------------------------------------------------


def test_ganeti_client_sets_role_drained_and_evacuates(ganeti: Ganeti, stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"), add_node("n3"))
    ok(stack, *(create(f"vm{i}", 1024, "n1") for i in range(4)))

    features, role, job, master = ganeti(
        ("GetFeatures", [], {}),
        ("GetNodeRole", ["n1"], {}),
        ("SetNodeRole", ["n1", "drained"], {"reason": "hardware swap"}),
        ("SetNodeRole", ["n1", "master"], {}),
    )
    assert "node-evac-res1" in features["ok"]
    assert role == {"ok": "regular"}
    assert master["error"] == 400 and "Can't set 'master' role" in master["message"]
    assert stack.wait_final(job["ok"]) == "success"
    assert stack.wc.get_object("node", "n1")["drained"] is True
    (op,) = stack.field(job["ok"], "ops")
    assert op["drained"] is True and op["reason"][0][:2] == ["gnt:user", "hardware swap"]

    # EvacuateNode(node) sends its ≥ 2.5 body form because of node-evac-res1, and gets a job id
    role, evacuation, missing = ganeti(
        ("GetNodeRole", ["n1"], {}),
        ("EvacuateNode", ["n1"], {}),
        ("EvacuateNode", ["nope"], {}),
    )
    assert role == {"ok": "drained"}
    assert missing["error"] == 404
    moves = wait_job_tree(stack, evacuation["ok"])
    assert len(moves) == 4
    nodes = {n["uuid"]: n["name"] for n in stack.wc.list_objects("node")}
    where = {i["name"]: nodes[i["primary_node"]] for i in stack.wc.list_objects("instance")}
    assert sorted(where) == [f"vm{i}" for i in range(4)]
    assert set(where.values()) <= {"n2", "n3"}  # none stays on the drained n1
    # force and auto-promote (which guard Ganeti's candidate pool) are taken as sent
    (back,) = ganeti(("SetNodeRole", ["n1", "regular"], {"force": True, "auto_promote": True}))
    assert stack.wait_final(back["ok"]) == "success"
    (role,) = ganeti(("GetNodeRole", ["n1"], {}))
    assert role == {"ok": "regular"}


# -- drains --------------------------------------------------------------------------------------


def test_drain_requests_are_checked_at_the_edge(rapi: Rapi, stack: Stack) -> None:
    ok(stack, add_node("n1"))
    bad = [
        ({"deadline": -1}, "deadline"),
        ({"deadline": "soon"}, "deadline"),
        ({"deadline": True}, "deadline"),
        ({"max_parallel": 0}, "max_parallel"),
        ({"max_parallel": 2.5}, "max_parallel"),
        ({"max_parallel": 2**64}, "max_parallel"),
        ({"priority": 20}, "priority"),
        ({"priority": -21}, "priority"),
        ({"message": 5}, "message"),
        ({"force": True}, "force"),
        ({"start_at": -1}, "start_at"),
        ({"start_at": "2026-12-24T02:00"}, "start_at"),
        ({"start_at": True}, "start_at"),
        ({"start_at": 1e300}, "start_at"),
    ]
    for body, word in bad:
        assert_error(rapi.call("PUT", "/2/nodes/n1/drain", body), 400, word)
    assert_error(rapi.call("PUT", "/2/nodes/n1/drain", ["x"]), 400, "dictionary")
    assert_error(rapi.call("PUT", "/2/nodes/n1/drain", raw=b"{"), 400, "JSON")
    assert_error(rapi.call("DELETE", "/2/nodes/n1/drain?keep_drained=yes"), 400, "keep_drained")
    assert_error(rapi.call("PUT", "/2/nodes/n1/drain", {}, user=READER), 403)
    assert_error(rapi.call("DELETE", "/2/nodes/n1/drain", user=READER), 403)
    assert_error(rapi.call("PUT", "/2/nodes/nope/drain", {}), 404, "nope")
    assert rapi.get("/2/jobs") == [{"id": 1, "uri": "/2/jobs/1"}]  # nothing was submitted


class OldLuxid:
    """A luxid from before the drains on the stack's socket: it answers `ping` and `version`
    and, like any JSON-RPC server, MethodNotFound to the methods it does not have."""

    METHODS = {"ping": "pong", "version": {"version": "0.9", "protocol": 1}}

    def __init__(self, path: Path) -> None:
        self.server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.server.bind(str(path))
        self.server.listen()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.server.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rwb") as stream:
            for line in stream:
                request = json.loads(line)
                method = request["method"]
                if method in self.METHODS:
                    reply: dict[str, Any] = {"result": self.METHODS[method]}
                else:
                    reply = {
                        "error": errors.MethodNotFound(f"Method not found: {method}").to_wire()
                    }
                stream.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], **reply}).encode()
                             + b"\n")  # fmt: skip
                stream.flush()

    def close(self) -> None:
        self.server.close()


@pytest.fixture
def old_luxid_rapi(daemon_factory: Any) -> Iterator[Rapi]:
    """A real wconfd with a node n1, the stand-in old luxid, and lw-rapi on them."""
    wconfd = daemon_factory("wconfd").start()
    write_users(wconfd.state_dir, ("admin", "admin-pw", True))
    with WConfdClient(wconfd.socket, name="test-writer") as wc:
        wc.update_locks_waiting(ADMIN_LOCKS, timeout=30)
        wc.add_object("node", {"name": "n1"})
        wc.free_locks()
    luxid = OldLuxid(wconfd.run_dir / "luxid.sock")
    yield Rapi(daemon_factory)
    luxid.close()


def test_a_luxid_without_drains_gets_501(old_luxid_rapi: Rapi) -> None:
    rapi = old_luxid_rapi
    for method, path, body in [
        ("GET", "/2/drains", None),
        ("GET", "/2/nodes/n1/drain", None),
        ("PUT", "/2/nodes/n1/drain", {"deadline": "15m", "max_parallel": 2}),
        ("DELETE", "/2/nodes/n1/drain?keep_drained=1", None),
    ]:
        answer = rapi.call(method, path, body) if body else rapi.call(method, path)
        assert_error(answer, 501, "does not serve drains", "MethodNotFound")
        assert answer.body["message"] == "Not Implemented"
    # what needs no luxid is still answered: unknown nodes and bad bodies
    assert_error(rapi.call("PUT", "/2/nodes/nope/drain", {}), 404, "nope")
    assert_error(rapi.call("PUT", "/2/nodes/n1/drain", {"max_parallel": 0}), 400)
    assert "Traceback" not in rapi.daemon.log()


def follow(
    stack: Stack, target: str, accept: Callable[[DrainStatus], bool], timeout: float = 60.0
) -> DrainStatus:
    """Follow a drain's events (wait_for_drain_change, no polling) until `accept(status)`."""
    return follow_events(stack, target, accept, timeout)[0]


def test_drain_start_progress_and_completion(rapi: Rapi, stack: Stack) -> None:
    ok(stack, add_node("n1"), add_node("n2"), add_node("n3"))
    ok(stack, *(create(f"app{i}", 1024, "n1") for i in range(4)))
    body = {"deadline": "1h", "max_parallel": 2, "priority": -5, "message": "kernel update"}
    answer = rapi.call("PUT", "/2/nodes/n1/drain", body)
    assert answer.status == 200, answer
    started = answer.body
    assert set(started) == DRAIN_FIELDS
    assert started["target"] == "node/n1" and started["max_parallel"] == 2
    assert started["message"] == "kernel update" and started["mode"] is None
    assert started["deadline"] == pytest.approx(started["started_at"] + 3600, abs=5)

    done = follow(stack, "node/n1", lambda s: s.status == "complete")
    shown = rapi.get("/2/nodes/n1/drain")
    assert shown["status"] == "complete" and shown["remaining"] == 0 and shown["total"] == 4
    assert shown["completed_at"] == done.completed_at and shown["deadline_reached"] is False
    assert shown["started_at"] == started["started_at"]
    assert "node/n1" in [d["target"] for d in rapi.get("/2/drains")]
    assert set(placed(rapi).values()) <= {"n2", "n3"}
    assert rapi.get("/2/nodes/n1/role") == "drained"  # a node stays drained after its drain
    # a node without instances completes at once; by uuid as every node resource
    ok(stack, add_node("n4"))
    uuid = rapi.get("/2/nodes/n4")["uuid"]
    assert rapi.call("PUT", f"/2/nodes/{uuid}/drain", {"deadline": None}).status == 200
    empty = follow(stack, "node/n4", lambda s: s.status == "complete")
    assert empty.total == 0 and rapi.get("/2/nodes/n4/drain")["deadline"] is None


@pytest.mark.parametrize("keep", [0, 1])
def test_blocked_drain_shows_why_updates_and_cancels(rapi: Rapi, stack: Stack, keep: int) -> None:
    ok(stack, add_node("n1"), add_node("n2", mtotal=2048))
    ok(stack, create("small", 1024, "n1"), create("big", 4096, "n1"))
    assert_error(rapi.call("GET", "/2/nodes/n1/drain"), 404, "has not been drained")
    assert_error(rapi.call("GET", "/2/nodes/nope/drain"), 404, "nope")
    first = rapi.call("PUT", "/2/nodes/n1/drain", {"deadline": None}).body
    assert first["status"] == "draining" and first["max_parallel"] == 1  # the default

    blocked = follow(stack, "node/n1", lambda s: s.remaining == 1 and bool(s.blocked))
    shown = rapi.get("/2/nodes/n1/drain")
    assert shown["status"] == "draining" and shown["remaining"] == 1
    ((what, why),) = shown["blocked"]
    assert what == "big" and "no node has room for big" in str(why)
    assert shown["blocked"] == [list(b) for b in blocked.blocked]
    assert placed(rapi) == {"small": "n2", "big": "n1"}

    updated = rapi.call("PUT", "/2/nodes/n1/drain", {"max_parallel": 3, "message": "later"})
    assert updated.status == 200, updated
    assert updated.body["max_parallel"] == 3 and updated.body["message"] == "later"
    assert updated.body["started_at"] == first["started_at"]

    canceled = rapi.call("DELETE", f"/2/nodes/n1/drain?keep_drained={keep}")
    assert canceled.status == 200, canceled
    assert canceled.body["status"] == "canceled"
    assert rapi.get("/2/nodes/n1/drain")["status"] == "canceled"
    if keep:
        for (job,) in stack.lc.query_jobs(ids=None, fields=["id"]):
            stack.wait_final(job)
        assert rapi.get("/2/nodes/n1")["drained"] is True
    else:  # an OP_NODE_SET_PARAMS job undrains the node
        stack.until(lambda: rapi.get("/2/nodes/n1")["drained"] is False, timeout=30)
    undrains = [
        op for (ops,) in stack.lc.query_jobs(ids=None, fields=["ops"]) for op in ops
        if op["OP_ID"] == "OP_NODE_SET_PARAMS" and op.get("drained") is False
    ]  # fmt: skip
    assert len(undrains) == 1 - keep
    assert placed(rapi)["big"] == "n1"


@pytest.mark.timeout(300)
def test_openapi_fuzz_of_the_node_resources_on_a_real_node(rapi: Rapi, stack: Stack) -> None:
    """Schema-driven requests (valid and invalid) to the drain, role and evacuate resources
    of an existing node: each is a job id, a status or a 4xx; never a 5xx other than the
    deliberate 501 of a luxid without drains, never a traceback."""
    schemathesis = pytest.importorskip("schemathesis")
    from hypothesis import HealthCheck, given, settings

    ok(stack, add_node("n1"), add_node("n2"), create("vm", 512, "n1"))
    schema = schemathesis.openapi.from_dict(rapi.get("/openapi.json"))
    token = base64.b64encode(b"admin:admin-pw").decode()
    failures: list[str] = []
    operations = [
        result.ok()
        for result in schema.get_all_operations()
        if result.ok().path.startswith("/2/nodes/{name}/")
    ]
    assert len(operations) == 7
    for operation in operations:
        for mode in (schemathesis.GenerationMode.POSITIVE, schemathesis.GenerationMode.NEGATIVE):

            @settings(
                max_examples=20,
                deadline=None,
                database=None,
                derandomize=True,
                suppress_health_check=list(HealthCheck),
            )
            @given(case=operation.as_strategy(generation_mode=mode))
            def check(case: Any) -> None:
                case.path_parameters = {"name": "n1"}
                response = case.call(
                    base_url=rapi.base, headers={"Authorization": f"Basic {token}"}, timeout=30
                )
                not_served = response.status_code == 501 and "does not serve" in response.text
                if response.status_code >= 500 and not not_served:
                    failures.append(
                        f"{case.method} {case.formatted_path} {case.query} {case.body!r}: "
                        f"{response.status_code} {response.text[:200]}"
                    )
                assert "Traceback" not in response.text

            check()
    assert not failures, "\n".join(failures)
    assert "Traceback" not in rapi.daemon.log()
    # valid role and evacuate requests got through to luxid as jobs (the first is the setup)
    submitted = stack.lc.query_jobs(ids=None, fields=["ops"])
    op_ids = {row[0][0]["OP_ID"] for row in submitted[1:]}
    assert {"OP_NODE_SET_PARAMS", "OP_NODE_EVACUATE"} <= op_ids, op_ids
