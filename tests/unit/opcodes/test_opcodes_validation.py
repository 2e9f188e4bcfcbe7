"""Submit-time validation of every built-in opcode (docs/contracts.md#job-processes-and-opcodes)."""

from __future__ import annotations

from typing import Any

import pytest

from client.errors import InvalidOpcode
from jobproc.opcodes import COMMON_PARAMS, validate_job, validate_opcode
from jobproc.opcodes.builtin import BUILTIN_OPCODES

# OP_ID -> (minimal valid params, full valid params, [(param, bad params)])
CASES: dict[str, tuple[dict[str, Any], dict[str, Any], list[tuple[str, dict[str, Any]]]]] = {
    "OP_TEST_DELAY": (
        {"duration": 0},
        {
            "duration": 1.5,
            "on_nodes": ["n1", "ghost"],
            "repeat": 3,
            "fail": True,
            "log_messages": ["a", "b"],
        },
        [
            ("duration", {}),
            ("duration", {"duration": -0.1}),
            ("duration", {"duration": "1"}),
            ("duration", {"duration": True}),
            ("on_nodes", {"duration": 0, "on_nodes": ["a/b"]}),
            ("on_nodes", {"duration": 0, "on_nodes": [""]}),
            ("on_nodes", {"duration": 0, "on_nodes": ["[lockset]"]}),
            ("on_nodes", {"duration": 0, "on_nodes": "n1"}),
            ("repeat", {"duration": 0, "repeat": -1}),
            ("repeat", {"duration": 0, "repeat": 1.5}),
            ("fail", {"duration": 0, "fail": "yes"}),
            ("log_messages", {"duration": 0, "log_messages": [1]}),
        ],
    ),
    "OP_CLUSTER_RENAME": (
        {"name": "c2"},
        {"name": "cluster-two.example.com"},
        [("name", {}), ("name", {"name": ""}), ("name", {"name": "a b"}), ("name", {"name": 3})],
    ),
    "OP_CLUSTER_SET_PARAMS": (
        {},
        {
            "max_running_jobs": 5,
            "mac_prefix": "AB:cd:01",
            "lock_enforcement": "warn",
            "tags": ["a", "b:c"],
            "vcpu_ratio": 2.5,
        },
        [
            ("vcpu_ratio", {"vcpu_ratio": 0}),
            ("vcpu_ratio", {"vcpu_ratio": "4"}),
            ("max_running_jobs", {"max_running_jobs": 0}),
            ("max_running_jobs", {"max_running_jobs": "5"}),
            ("mac_prefix", {"mac_prefix": "aa:00"}),
            ("mac_prefix", {"mac_prefix": "zz:00:00"}),
            ("lock_enforcement", {"lock_enforcement": "off"}),
            ("tags", {"tags": ["has space"]}),
            ("tags", {"tags": "a"}),
        ],
    ),
    "OP_NODE_ADD": (
        {"node_name": "n9"},
        {
            "node_name": "n9",
            "group": "default",
            "primary_ip": "2001:db8::9",
            "mtotal": 131072,
            "ctotal": 64,
        },
        [
            ("node_name", {}),
            ("mtotal", {"node_name": "n9", "mtotal": -1}),
            ("mtotal", {"node_name": "n9", "mtotal": "64G"}),
            ("ctotal", {"node_name": "n9", "ctotal": 1.5}),
            ("node_name", {"node_name": "a/b"}),
            ("group", {"node_name": "n9", "group": ""}),
            ("primary_ip", {"node_name": "n9", "primary_ip": "300.1.1.1"}),
            ("primary_ip", {"node_name": "n9", "primary_ip": 1}),
        ],
    ),
    "OP_NODE_REMOVE": (
        {"node_name": "n1"},
        {"node_name": "n1"},
        [("node_name", {}), ("node_name", {"node_name": None})],
    ),
    "OP_NODE_SET_PARAMS": (
        {"node_name": "n1", "drained": True},
        {
            "node_name": "n1",
            "offline": False,
            "drained": False,
            "master_candidate": True,
            "mtotal": 1024,
            "ctotal": 2,
        },
        [
            ("mtotal", {"node_name": "n1", "mtotal": -5}),
            ("ctotal", {"node_name": "n1", "ctotal": "many"}),
            ("node_name", {"drained": True}),
            ("offline", {"node_name": "n1"}),
            ("drained", {"node_name": "n1", "offline": True, "drained": True}),
            ("master_candidate", {"node_name": "n1", "master_candidate": "yes"}),
        ],
    ),
    "OP_INSTANCE_CREATE": (
        {"instance_name": "i9", "memory": 128, "vcpus": 1, "disks": []},
        {
            "instance_name": "i9",
            "memory": 128,
            "vcpus": 2,
            "disks": [{"size": 1024}, {"size": 10, "mode": "ro"}],
            "pnode": "n1",
            "nics": 2,
        },
        [
            ("instance_name", {"memory": 1, "vcpus": 1, "disks": []}),
            ("memory", {"instance_name": "i9", "vcpus": 1, "disks": []}),
            ("memory", {"instance_name": "i9", "memory": 0, "vcpus": 1, "disks": []}),
            ("vcpus", {"instance_name": "i9", "memory": 1, "vcpus": 0, "disks": []}),
            ("disks", {"instance_name": "i9", "memory": 1, "vcpus": 1}),
            ("disks", {"instance_name": "i9", "memory": 1, "vcpus": 1, "disks": [{}]}),
            ("disks", {"instance_name": "i9", "memory": 1, "vcpus": 1, "disks": [{"size": 0}]}),
            (
                "disks",
                {
                    "instance_name": "i9",
                    "memory": 1,
                    "vcpus": 1,
                    "disks": [{"size": 1, "spindles": 2}],
                },
            ),
            (
                "disks",
                {"instance_name": "i9", "memory": 1, "vcpus": 1, "disks": [{"size": 1}] * 17},
            ),
            (
                "pnode",
                {"instance_name": "i9", "memory": 1, "vcpus": 1, "disks": [], "pnode": "a/b"},
            ),
            ("nics", {"instance_name": "i9", "memory": 1, "vcpus": 1, "disks": [], "nics": -1}),
            ("nics", {"instance_name": "i9", "memory": 1, "vcpus": 1, "disks": [], "nics": 9}),
        ],
    ),
    "OP_INSTANCE_REMOVE": (
        {"instance_name": "i1"},
        {"instance_name": "i1"},
        [("instance_name", {}), ("instance_name", {"instance_name": ""})],
    ),
    "OP_INSTANCE_MIGRATE": (
        {"instance_name": "i1"},
        {"instance_name": "i1", "target_node": "n2", "duration": 0.5},
        [
            ("instance_name", {}),
            ("target_node", {"instance_name": "i1", "target_node": ""}),
            ("duration", {"instance_name": "i1", "duration": -1}),
        ],
    ),
    "OP_INSTANCE_FAILOVER": (
        {"instance_name": "i1"},
        {"instance_name": "i1", "target_node": "n2", "duration": 3},
        [
            ("instance_name", {}),
            ("target_node", {"instance_name": "i1", "target_node": "a/b"}),
            ("duration", {"instance_name": "i1", "duration": "soon"}),
        ],
    ),
    "OP_INSTANCE_STARTUP": (
        {"instance_name": "i1"},
        {"instance_name": "i1"},
        [("instance_name", {}), ("instance_name", {"instance_name": 7})],
    ),
    "OP_INSTANCE_SHUTDOWN": (
        {"instance_name": "i1"},
        {"instance_name": "i1"},
        [("instance_name", {}), ("target_node", {"instance_name": "i1", "target_node": "n1"})],
    ),
    "OP_INSTANCE_REPLACE_DISKS": (
        {"instance_name": "i1", "mode": "replace_auto"},
        {"instance_name": "i1", "mode": "replace_on_secondary", "duration": 2},
        [
            ("instance_name", {"mode": "replace_auto"}),
            ("mode", {"instance_name": "i1"}),
            ("mode", {"instance_name": "i1", "mode": "replace_everything"}),
            ("duration", {"instance_name": "i1", "mode": "replace_auto", "duration": -1}),
        ],
    ),
    "OP_NODE_EVACUATE": (
        {"node_name": "n1"},
        {"node_name": "n1"},
        [("node_name", {}), ("node_name", {"node_name": "[lockset]"})],
    ),
    "OP_CLUSTER_VERIFY": ({}, {}, []),
}

COMMON_GOOD = {
    "priority": -20,
    "depends": [[-1, ["success", "error"]], [7, []]],
    "reason": [["user:cli", "maintenance", 1_700_000_000_000_000_000]],
    "comment": "hello",
}
COMMON_BAD: list[tuple[str, dict[str, Any]]] = [
    ("priority", {"priority": 20}),
    ("priority", {"priority": -21}),
    ("priority", {"priority": "high"}),
    ("priority", {"priority": 1.0}),
    ("depends", {"depends": [[0, []]]}),
    ("depends", {"depends": [[1, ["running"]]]}),
    ("depends", {"depends": [[1]]}),
    ("reason", {"reason": [["", "text", 1]]}),
    ("reason", {"reason": [["src", "text", 1.5]]}),
    ("reason", {"reason": [["src", "text"]]}),
    ("comment", {"comment": 5}),
]


def test_the_table_covers_every_builtin() -> None:
    assert set(CASES) == {cls.OP_ID for cls in BUILTIN_OPCODES}


@pytest.mark.parametrize("op_id", sorted(CASES))
def test_good_params_validate(op_id: str) -> None:
    minimal, full, _ = CASES[op_id]
    for params in (minimal, full, {**minimal, **COMMON_GOOD}):
        got_id, struct = validate_opcode({"OP_ID": op_id, **params})
        assert got_id == op_id
        for key, value in params.items():
            if key not in COMMON_PARAMS and key != "disks":
                assert getattr(struct, key) == value


@pytest.mark.parametrize(
    ("op_id", "param", "params"),
    [(op_id, param, bad) for op_id, (_, _, bads) in CASES.items() for param, bad in bads]
    + [
        (op_id, param, {**CASES[op_id][0], **bad})
        for op_id in ("OP_TEST_DELAY", "OP_CLUSTER_VERIFY", "OP_INSTANCE_CREATE")
        for param, bad in COMMON_BAD
    ],
)
def test_bad_param_is_named(op_id: str, param: str, params: dict[str, Any]) -> None:
    with pytest.raises(InvalidOpcode) as exc:
        validate_opcode({"OP_ID": op_id, **params})
    assert exc.value.data["op_id"] == op_id
    assert exc.value.data["param"] == param
    assert op_id in exc.value.message
    assert repr(param) in exc.value.message


@pytest.mark.parametrize("op_id", sorted(CASES))
def test_unknown_param_is_refused(op_id: str) -> None:
    with pytest.raises(InvalidOpcode) as exc:
        validate_opcode({"OP_ID": op_id, **CASES[op_id][0], "dry_run": True})
    assert exc.value.message == f"{op_id}: unknown parameter 'dry_run'"
    assert exc.value.data["param"] == "dry_run"


def test_messages_say_what_was_wrong() -> None:
    with pytest.raises(InvalidOpcode, match=r"'duration': Expected `float` >= 0.0, got -1"):
        validate_opcode({"OP_ID": "OP_TEST_DELAY", "duration": -1})
    with pytest.raises(InvalidOpcode, match=r"missing required parameter 'duration'"):
        validate_opcode({"OP_ID": "OP_TEST_DELAY"})
    with pytest.raises(InvalidOpcode, match=r"RFC 1123 host name.*got 'a/b' \(at on_nodes\[1\]\)"):
        validate_opcode({"OP_ID": "OP_TEST_DELAY", "duration": 0, "on_nodes": ["a", "a/b"]})
    with pytest.raises(InvalidOpcode, match=r"unknown field `sz` \(at disks\[0\]\)"):
        validate_opcode(
            {
                "OP_ID": "OP_INSTANCE_CREATE",
                "instance_name": "i",
                "memory": 1,
                "vcpus": 1,
                "disks": [{"sz": 1}],
            }
        )


def test_unknown_op_id_lists_the_known_ones() -> None:
    with pytest.raises(InvalidOpcode) as exc:
        validate_opcode({"OP_ID": "OP_NOPE"})
    assert "'OP_NOPE'" in exc.value.message
    for op_id in CASES:
        assert op_id in exc.value.message
    assert exc.value.data == {"op_id": "OP_NOPE", "param": "OP_ID", "type": "InvalidOpcode"}
    assert exc.value.code == -32041


@pytest.mark.parametrize("op", [None, [], "OP_TEST_DELAY", {}, {"OP_ID": 3}, {"duration": 1}])
def test_malformed_opcodes(op: Any) -> None:
    with pytest.raises(InvalidOpcode):
        validate_opcode(op)


def test_defaults_of_common_params() -> None:
    _, params = validate_opcode({"OP_ID": "OP_TEST_DELAY", "duration": 0})
    assert (params.priority, params.depends, params.reason, params.comment) == (0, None, [], None)
    _, params = validate_opcode(
        {"OP_ID": "OP_TEST_DELAY", "duration": 0, "reason": None, "depends": None, "comment": None}
    )
    assert (params.depends, params.reason, params.comment) == (None, [], None)


def test_validate_job_names_the_opcode_index() -> None:
    ok = validate_job([{"OP_ID": "OP_CLUSTER_VERIFY"}, {"OP_ID": "OP_TEST_DELAY", "duration": 1}])
    assert [op_id for op_id, _ in ok] == ["OP_CLUSTER_VERIFY", "OP_TEST_DELAY"]
    with pytest.raises(InvalidOpcode) as exc:
        validate_job([{"OP_ID": "OP_CLUSTER_VERIFY"}, {"OP_ID": "OP_TEST_DELAY"}])
    assert exc.value.message.startswith("opcode 1: OP_TEST_DELAY: missing")
    assert exc.value.data["index"] == 1
    assert exc.value.data["param"] == "duration"
