"""Names are names (docs/contracts.md#names), through the real daemons: a node, instance,
node group or network named like markup is refused by wconfd, an opcode naming one is
refused at submit, and a client name with a newline is refused without a forged log line.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import psutil
import pytest

from client import errors

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack

pytestmark = pytest.mark.timeout(60)

MARKUP = "<img src=x onerror=alert(1)>"


@pytest.fixture
def stack(daemon_factory):
    s = Stack(daemon_factory)
    yield s
    s.close()


def test_markup_names_are_refused_by_wconfd_naming_the_rule(stack):
    group = stack.wc.list_objects("nodegroup")[0]["uuid"]
    objects = {
        "node": {"name": MARKUP, "group": group},
        "nodegroup": {"name": MARKUP},
        "network": {"name": MARKUP, "network": "10.0.0.0/24"},
        "instance": {"name": MARKUP, "primary_node": "n1", "memory": 128, "vcpus": 1},
    }
    for kind, obj in objects.items():
        with pytest.raises(errors.ConfigValidationError) as caught:
            stack.wc.add_object(kind, obj)
        assert "RFC 1123 host name" in caught.value.message, kind
        assert caught.value.data["field"] == "name"
    with pytest.raises(errors.ConfigValidationError, match="tag 'a b' is not 1-128"):
        stack.wc.add_object("nodegroup", {"name": "g2", "tags": ["a b"]})
    assert [g["name"] for g in stack.wc.list_objects("nodegroup")] == ["default"]


def test_an_opcode_naming_markup_is_invalid_opcode_at_submit(stack):
    for op in (
        {"OP_ID": "OP_INSTANCE_STARTUP", "instance_name": MARKUP},
        {"OP_ID": "OP_NODE_ADD", "node_name": "node1\nforged"},
    ):
        with pytest.raises(errors.InvalidOpcode, match="RFC 1123 host name"):
            stack.lc.submit_job(ops=[op])
    assert stack.lc.query_jobs(ids=None, fields=["id"]) == []


def test_a_client_name_with_a_newline_is_refused_and_forges_no_log_line(stack, raw_factory):
    forged = "x\nERROR wconfd forged line"
    conn = raw_factory(stack.wconfd.socket)
    pid = os.getpid()
    params = {"job_id": None, "pid": pid, "start_time": psutil.Process(pid).create_time()}
    answer = conn.call(
        json.dumps(
            {"jsonrpc": "2.0", "method": "identify", "params": {**params, "name": forged}, "id": 1}
        ).encode()
        + b"\n"
    )
    assert answer["error"]["data"]["type"] == "InvalidParams"
    assert "A-Z a-z 0-9 . _ @ + -" in answer["error"]["message"]
    # The same process may identify with a good name on the same connection afterwards.
    good = {"jsonrpc": "2.0", "method": "identify", "params": {**params, "name": "ok"}, "id": 2}
    assert "result" in conn.call(json.dumps(good).encode() + b"\n")
    stack.wconfd.stop()
    assert not any(
        line.startswith("ERROR wconfd forged") for line in stack.wconfd.log().splitlines()
    )
