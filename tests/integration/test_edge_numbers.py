"""The edge of both daemons (docs/contracts.md#numbers): what a client sends is checked before a
method runs.

Every integer must fit in signed 64 bits and every float be finite, else InvalidParams naming
the param (down to the path inside it) with the request's own id; each param's own range is
checked too; a submitted opcode's common params are checked (InvalidOpcode).  Then a property
test: random and hostile params for EVERY declared method of both daemons, through the real
sockets, never give InternalError, never lose the request's id, never kill the daemon.
"""

from __future__ import annotations

import itertools
import json
import math
import os
import re
from typing import Any

import psutil
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from client import LuxiClient
from client.api.luxi import LuxiApi
from client.api.wconfd import WConfdApi

pytestmark = pytest.mark.timeout(300)

INF = "__INF__"  # stands for 1e400 in a frame: JSON has no infinity, but a literal can overflow


def frame(method: str, params: Any, request_id: Any) -> bytes:
    """A request frame; float infinities and NaN are written as the overflowing 1e400."""

    def mark(value: Any) -> Any:
        if isinstance(value, float) and not math.isfinite(value):
            return INF if value > 0 or math.isnan(value) else "-" + INF
        if isinstance(value, list):
            return [mark(v) for v in value]
        if isinstance(value, dict):
            return {k: mark(v) for k, v in value.items()}
        return value

    text = json.dumps(
        {"jsonrpc": "2.0", "method": method, "params": mark(params), "id": request_id}
    )
    return text.replace(f'"-{INF}"', "-1e400").replace(f'"{INF}"', "1e400").encode() + b"\n"


def identify(conn: Any) -> None:
    pid = os.getpid()
    params = {
        "job_id": None,
        "pid": pid,
        "start_time": psutil.Process(pid).create_time(),
        "name": "edge",
    }
    answer = conn.call(frame("identify", params, 0))
    assert "result" in answer, answer


@pytest.fixture
def wconn(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    identify(conn)
    return conn


@pytest.fixture
def lconn(luxid, raw_factory):
    return raw_factory(luxid.socket)


def refused(conn: Any, method: str, params: Any, error: str, path: str) -> str:
    """Send a call with a bad value at `path`; assert error `error` names it, with our id."""
    answer = conn.call(frame(method, params, 41))
    assert answer["id"] == 41, answer
    assert answer.get("error", {}).get("data", {}).get("type") == error, answer
    message = answer["error"]["message"]
    assert path in message, message
    return str(message)


@pytest.mark.parametrize(
    ("method", "params", "path"),
    [
        ("update_locks_waiting", {"request": [], "timeout": float("inf")}, "timeout"),
        ("update_locks_waiting", {"request": [], "priority": 2**64}, "priority"),
        ("update_locks_waiting", {"request": [], "priority": 20}, "priority"),
        ("update_locks_waiting", {"request": [], "timeout": -1}, "timeout"),
        ("opportunistic_lock_union", {"request": [], "min_count": -1}, "min_count"),
        (
            "add_object",
            {"kind": "instance", "object": {"name": "i", "memory": 2**80}},
            "object.memory",
        ),
        (
            "wait_config_change",
            {"since_serial": 18446744073709551616, "timeout": 0},
            "since_serial",
        ),
        ("try_update_locks", {"request": [["node/a", -(2**63) - 1]]}, "request[0][1]"),
    ],
)
def test_wconfd_refuses_numbers_out_of_range(wconn, wconfd, method, params, path):
    refused(wconn, method, params, "InvalidParams", path)
    assert wconn.call(frame("ping", {}, 2))["result"] == "pong"
    assert "internal error" not in wconfd.log()


def test_an_unidentified_call_is_still_answered_invalid_params_with_its_id(wconfd, raw_factory):
    conn = raw_factory(wconfd.socket)
    refused(
        conn, "identify", {"job_id": None, "pid": 2**64, "start_time": 0}, "InvalidParams", "pid"
    )
    refused(
        conn,
        "identify",
        {"job_id": None, "pid": 1, "start_time": float("inf")},
        "InvalidParams",
        "start_time",
    )


@pytest.mark.parametrize(
    ("method", "params", "path"),
    [
        ("submit_job", {"ops": [{"OP_ID": "OP_TEST_DELAY", "duration": 2**64}]}, "ops[0].duration"),
        (
            "submit_job",
            {"ops": [{"OP_ID": "OP_TEST_DELAY", "duration": float("inf")}]},
            "ops[0].duration",
        ),
        (
            "submit_many_jobs",
            {"jobs": [[{"OP_ID": "OP_TEST_DELAY", "duration": -(2**70)}]]},
            "jobs[0][0].duration",
        ),
        (
            "replace_filter",
            {"uuid": None, "priority": 2**64, "predicates": [], "action": "ACCEPT", "reason": []},
            "priority",
        ),
        (
            "replace_filter",
            {"uuid": None, "priority": 10**30, "predicates": [], "action": "ACCEPT", "reason": []},
            "priority",
        ),
        (
            "replace_filter",
            {
                "uuid": None,
                "priority": 0,
                "predicates": [["jobid", [">", "id", 10**30]]],
                "action": "ACCEPT",
                "reason": [],
            },
            "predicates[0][1][2]",
        ),
        ("change_job_priority", {"job_id": 1, "priority": -21}, "priority"),
        ("cancel_job", {"job_id": -1}, "job_id"),
        (
            "wait_for_job_change",
            {
                "job_id": 1,
                "fields": [],
                "prev_values": None,
                "prev_log_serial": None,
                "timeout": -1,
            },
            "timeout",
        ),
        ("auto_archive_jobs", {"age": 0, "timeout": float("-inf")}, "timeout"),
        ("query_jobs", {"ids": [1, 2**63], "fields": ["id"]}, "ids[1]"),
    ],
)
def test_luxid_refuses_numbers_out_of_range(lconn, luxid, method, params, path):
    refused(lconn, method, params, "InvalidParams", path)
    assert lconn.call(frame("ping", {}, 2))["result"] == "pong"
    assert "internal error" not in luxid.log()


def test_submitted_opcodes_have_their_common_params_checked(lconn, luxid):
    bad_status = {"OP_ID": "OP_TEST_DELAY", "duration": 0, "depends": [[1, [["success"]]]]}
    message = refused(lconn, "submit_job", {"ops": [bad_status]}, "InvalidOpcode", "depends")
    assert "OP_TEST_DELAY" in message
    bad_reason = {"OP_ID": "OP_TEST_DELAY", "duration": 0, "reason": [["src", "text"]]}
    refused(lconn, "submit_job", {"ops": [bad_reason]}, "InvalidOpcode", "reason")
    # submit_many_jobs answers per job: the malformed one is refused, not a crash of the call.
    answer = lconn.call(
        frame(
            "submit_many_jobs",
            {"jobs": [[bad_status], [{**bad_status, "depends": [[1, [{}]]]}]]},
            9,
        )
    )
    assert answer["id"] == 9 and [ok for ok, _ in answer["result"]] == [False, False], answer
    assert "internal error" not in luxid.log()


def test_a_batch_member_with_a_bad_number_gets_its_own_error(lconn):
    batch = b"[" + frame("ping", {}, 1).strip() + b"," + frame(
        "cancel_job", {"job_id": 2**64}, 2
    ).strip() + b"]\n"  # fmt: skip
    answers = {a["id"]: a for a in lconn.call(batch)}
    assert answers[1]["result"] == "pong"
    assert answers[2]["error"]["data"]["type"] == "InvalidParams"


# -- the property: hostile params for every declared method ------------------------------

HOSTILE_NUMBERS = [
    2**63,
    -(2**63) - 1,
    2**64,
    10**30,
    2**80,
    float("inf"),
    float("-inf"),
    float("nan"),
]
leaves = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=6),
    st.sampled_from(HOSTILE_NUMBERS),
    st.sampled_from(["node/n1", "cluster/BGL", "node/[lockset]", "shared", "exclusive", "release"]),
    st.sampled_from(["OP_TEST_DELAY", "success", "jobid", "id", "==", "ACCEPT", "PAUSE", "node"]),
)
json_values = st.recursive(
    leaves,
    lambda kids: (
        st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=6), kids, max_size=4)
    ),
    max_leaves=10,
)
# Shapes that get past the type checks into the methods themselves.
opcodes = st.fixed_dictionaries(
    {"OP_ID": st.sampled_from(["OP_TEST_DELAY", "OP_NOPE", "OP_"])},
    optional={
        "duration": st.one_of(st.floats(0, 0.01), json_values),
        "on_nodes": json_values,
        "priority": st.one_of(st.integers(-25, 25), json_values),
        "depends": st.lists(
            st.tuples(
                st.integers(-3, 3),
                st.one_of(
                    st.lists(
                        st.one_of(st.sampled_from(["success", "error"]), json_values), max_size=2
                    ),
                    json_values,
                ),
            ).map(list),
            max_size=2,
        ),
        "reason": json_values,
        "comment": json_values,
    },
)
lock_pairs = st.lists(
    st.tuples(
        st.sampled_from(["node/n1", "node/[lockset]", "cluster/BGL", "bogus", "instance/i1"]),
        st.sampled_from(["shared", "exclusive", "release", "x"]),
    ).map(list),
    max_size=3,
)
# A timeout is bounded so a valid call never waits long (the walk checks huge ones anyway).
timeouts = st.one_of(
    st.none(), st.floats(0, 0.05), st.sampled_from(HOSTILE_NUMBERS), st.integers(-5, -1)
)
SHAPES: dict[str, Any] = {
    "ops": st.one_of(st.lists(opcodes, min_size=1, max_size=2), json_values),
    "jobs": st.lists(st.lists(opcodes, min_size=1, max_size=2), max_size=2),
    "request": st.one_of(lock_pairs, json_values),
    "locks": st.lists(st.sampled_from(["node/n1", "node/x", "bad"]), max_size=2),
    "event": st.one_of(
        st.fixed_dictionaries(
            {"event": st.sampled_from(["hello", "check", "log", "finish", "priority"])},
            optional={"index": json_values, "seq": json_values, "priority": json_values},
        ),
        json_values,
    ),
    "predicates": st.one_of(
        st.lists(
            st.tuples(st.sampled_from(["jobid", "opcode", "reason"]), json_values).map(list),
            max_size=2,
        ),
        json_values,
    ),
    "kind": st.one_of(
        st.sampled_from(["node", "instance", "filter", "cluster", "network", "nodegroup"]),
        json_values,
    ),
    "object": st.one_of(
        st.fixed_dictionaries(
            {"name": st.sampled_from(["n9", "i9"])}, optional={"memory": json_values}
        ),
        json_values,
    ),
    "timeout": timeouts,
}


def call_params(spec: Any) -> st.SearchStrategy[Any]:
    """Params for one method: by name, some missing, some extra, values shaped or hostile."""
    values = {
        name: st.one_of(SHAPES.get(name, json_values), json_values) for name in spec.param_names
    }
    if "timeout" in values:
        values["timeout"] = timeouts
    by_name = st.fixed_dictionaries({}, optional=values)
    extra = st.dictionaries(st.text(max_size=4), json_values, max_size=1)
    return st.one_of(
        by_name,
        st.tuples(by_name, extra).map(lambda p: {**p[1], **p[0]}),
        st.lists(json_values, max_size=3),
    )


def calls(api: Any) -> st.SearchStrategy[tuple[str, Any]]:
    methods = sorted(api.methods().items())
    return st.one_of([st.tuples(st.just(name), call_params(spec)) for name, spec in methods])


def check_daemon(daemon: Any, conn: Any, api: Any, examples: int) -> None:
    ids = itertools.count(100)
    seen: set[str] = set()

    @given(calls(api))
    @settings(
        max_examples=examples, deadline=None, suppress_health_check=list(HealthCheck), database=None
    )
    def one_call(call: tuple[str, Any]) -> None:
        method, params = call
        if method == "identify":  # another identity on this connection is refused anyway
            params = {}
        request_id = next(ids)
        if api.methods()[method].options.pushes:  # it pushes on: a connection of its own
            own = type(conn)(daemon.socket)
            answer = own.call(frame(method, params, request_id))
            own.close()
        else:
            answer = conn.call(frame(method, params, request_id))
        assert answer.get("id") == request_id, (method, params, answer)
        error = answer.get("error")
        if error is not None:
            assert error["data"]["type"] not in ("InternalError", "ParseError"), (
                method,
                params,
                answer,
            )
        seen.add(method)

    for name, spec in sorted(
        api.methods().items()
    ):  # every method at least once, whatever is drawn
        one_call = example((name, {"timeout": 0} if "timeout" in spec.param_names else {}))(
            one_call
        )
    one_call()
    assert seen == set(api.methods()), "a method was never called"
    assert daemon.proc.poll() is None, "the daemon died"
    assert conn.call(frame("ping", {}, 1))["result"] == "pong"
    assert not re.search(r"internal error|Traceback", daemon.log()), daemon.log()[-3000:]


def test_hostile_params_for_every_wconfd_method(wconfd, wconn):
    check_daemon(wconfd, wconn, WConfdApi, 600)


def test_hostile_params_for_every_luxid_method(daemon_factory, raw_factory):
    daemon_factory("wconfd").start()
    luxid = daemon_factory("luxid").start()
    try:
        check_daemon(luxid, raw_factory(luxid.socket), LuxiApi, 600)
    finally:  # valid random jobs may sleep long: no job process outlives the test
        with LuxiClient(luxid.socket) as lc:
            lc.set_drain_flag(flag=True)
            for job_id, status in lc.query_jobs(ids=None, fields=["id", "status"]):
                if status not in ("success", "error", "canceled"):
                    lc.cancel_job(job_id=job_id, kill=True)
