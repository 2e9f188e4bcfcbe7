"""JSON schemas of the RAPI's parameters, bodies and answers, for the OpenAPI document
(`rapi.openapi`).  Ganeti's shapes (doc/rapi.rst); the node, instance, group and info
schemas list the fields htools read (docs/contracts.md#rapi-paths), which the fuzz test
checks answers against.
"""

from __future__ import annotations

from typing import Any

import msgspec

from client.api.common import TOPICS as TOPIC_NAMES
from client.api.common import Event
from client.api.luxi import BudgetRow, DrainPlan, DrainStatus
from client.api.why import WhyJob
from client.audit import AuditEntry
from client.drains import START_AT_MAX
from client.rapi_users import ROLES
from client.vocabulary import JOB_STATUSES, RATE_LIMIT, WORD_FILTER_ACTIONS
from rapi.drains import PRIORITIES
from rapi.instanceops import (
    CREATE_MODE,
    DEFAULT_VCPUS,
    DELETE_PARAMS,
    FAILOVER_PARAMS,
    MIGRATE_PARAMS,
    MIGRATION_MODES,
    REQ_DATA_VERSION,
    SHUTDOWN_PARAMS,
    STARTUP_PARAMS,
)
from rapi.jobs import FILTER_RULE_FIELDS, J_FIELDS
from rapi.nodeops import EVAC_MODES, ROLE_FLAGS, ROLE_NAMES
from rapi.routing import Param

STR = {"type": "string"}
INT = {"type": "integer"}
NUM_OR_NULL = {"type": ["number", "null"]}
STR_LIST = {"type": "array", "items": STR}
LIST = {"type": "array"}
NUM = {"type": "number"}
BOOL = {"type": "boolean"}
ISPEC_KEYS = ("memory-size", "cpu-count", "disk-count", "disk-size", "nic-count", "spindle-use")
NODE_SIZES = ("mtotal", "mnode", "mfree", "dtotal", "dfree", "ctotal", "cnos", "spfree")


def obj(props: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    """An object schema with these properties (and required ones)."""
    out: dict[str, Any] = {"type": "object", "properties": props}
    if required is not None:
        out["required"] = required
    return out


def ref(name: str) -> dict[str, Any]:
    """A reference to one of SCHEMAS."""
    return {"$ref": f"#/components/schemas/{name}"}


SCHEMAS: dict[str, dict[str, Any]] = {
    "Error": obj({"code": INT, "message": STR, "explain": STR}, ["code", "message", "explain"]),
    "IdUri": obj({"id": {"type": ["string", "integer"]}, "uri": STR}, ["id", "uri"]),
    "UuidUri": obj({"uuid": STR, "uri": STR}, ["uuid", "uri"]),
    "Info": obj(
        {
            "name": STR,
            "uuid": STR,
            "master": STR,
            "default_hypervisor": {"type": "string", "enum": ["fake"]},
            "ipolicy": ref("IPolicy"),
            "software_version": STR,
            "protocol_version": INT,
            "max_running_jobs": INT,
            "tags": STR_LIST,
            "queue": {"type": "object"},
            "insecure_http": {
                "type": "boolean",
                "description": "true when lw-rapi serves plain HTTP off loopback (--insecure-http)",
            },
        },
        [
            "name",
            "uuid",
            "master",
            "default_hypervisor",
            "ipolicy",
            "tags",
            "software_version",
            "insecure_http",
        ],
    ),
    "ISpec": obj(dict.fromkeys(ISPEC_KEYS, INT), list(ISPEC_KEYS)),
    "IPolicy": obj(
        {
            "minmax": {
                "type": "array",
                "items": obj({"min": ref("ISpec"), "max": ref("ISpec")}, ["min", "max"]),
            },
            "std": ref("ISpec"),
            "disk-templates": STR_LIST,
            "vcpu-ratio": NUM,
            "spindle-ratio": NUM,
        },
        ["minmax", "std", "disk-templates", "vcpu-ratio", "spindle-ratio"],
    ),
    "Group": obj(
        {
            "name": STR,
            "uuid": STR,
            "alloc_policy": {"type": "string", "enum": ["preferred", "last_resort", "unallocable"]},
            "ipolicy": ref("IPolicy"),
            "node_cnt": INT,
            "node_list": STR_LIST,
            "tags": STR_LIST,
        },
        ["name", "uuid", "alloc_policy", "ipolicy", "tags"],
    ),
    "Node": obj(
        {
            "name": STR,
            "uuid": STR,
            "offline": BOOL,
            "drained": BOOL,
            "master_candidate": BOOL,
            "vm_capable": BOOL,
            "role": {"type": "string", "enum": ["O", "D", "C", "R"]},
            "pip": {"type": ["string", "null"]},
            "group.uuid": STR,
            "ndparams": obj({"exclusive_storage": BOOL, "spindle_count": INT}),
            **dict.fromkeys(NODE_SIZES, INT),
            "pinst_cnt": INT,
            "pinst_list": STR_LIST,
            "tags": STR_LIST,
        },
        [
            "name",
            "uuid",
            "role",
            "offline",
            "drained",
            "vm_capable",
            "ndparams",
            "group.uuid",
            *NODE_SIZES,
            "tags",
        ],
    ),
    "Instance": obj(
        {
            "name": STR,
            "uuid": STR,
            "admin_state": {"type": "string", "enum": ["up", "down", "offline"]},
            "status": {"type": "string", "enum": ["running", "ADMIN_down", "ADMIN_offline"]},
            "pnode": STR,
            "snodes": STR_LIST,
            "disk_template": {"type": "string", "enum": ["sharedfile"]},
            "disk_usage": INT,
            "beparams": obj(
                {"memory": INT, "vcpus": INT, "auto_balance": BOOL, "spindle_use": INT},
                ["memory", "vcpus", "auto_balance", "spindle_use"],
            ),
            "oper_ram": {"type": ["integer", "null"]},
            "disk.sizes": {"type": "array", "items": INT},
            "disk.spindles": {"type": "array", "items": {"type": ["integer", "null"]}},
            "nic.macs": {"type": "array"},
            "tags": STR_LIST,
        },
        [
            "name",
            "uuid",
            "pnode",
            "snodes",
            "status",
            "disk_template",
            "disk_usage",
            "disk.sizes",
            "disk.spindles",
            "beparams",
            "oper_ram",
            "tags",
        ],
    ),
    "Job": obj(
        {
            "id": INT,
            "status": {"type": "string", "enum": list(JOB_STATUSES)},
            "ops": {"type": "array", "items": {"type": "object"}},
            "summary": STR_LIST,
            "opstatus": STR_LIST,
            "received_ts": NUM_OR_NULL,
            "start_ts": NUM_OR_NULL,
            "end_ts": NUM_OR_NULL,
            "oplog": LIST,
            "opresult": LIST,
            "priority": INT,
            "pending_reason": {"type": ["string", "null"]},
        },
        ["id", "status", "ops", "summary", "opstatus"],
    ),
    "Filter": obj(
        {
            "uuid": STR,
            "watermark": INT,
            "priority": INT,
            "predicates": LIST,
            "action": {"oneOf": [STR, LIST]},
            "reason_trail": LIST,
        },
        FILTER_RULE_FIELDS,
    ),
    "BudgetBody": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "tags": {"type": "array", "items": STR, "minItems": 1},
            "max_disrupted": {"type": "integer", "minimum": 0},
        },
        "required": ["tags", "max_disrupted"],
    },
    "FilterBody": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "priority": {"type": "integer", "minimum": 0},
            "predicates": {"type": "array", "items": {"type": "array"}},
            "action": {
                "oneOf": [
                    {"type": "string", "enum": list(WORD_FILTER_ACTIONS)},
                    {
                        "type": "array",
                        "prefixItems": [{"const": RATE_LIMIT}, {"type": "integer", "minimum": 1}],
                        "minItems": 2,
                        "maxItems": 2,
                    },
                ]
            },
            "reason": {
                "type": "array",
                "items": {
                    "type": "array",
                    "prefixItems": [STR, STR, INT],
                    "minItems": 3,
                    "maxItems": 3,
                },
            },
        },
    },
    "WaitBody": {
        "type": "object",
        "required": ["fields"],
        "properties": {
            "fields": {"type": "array", "items": {"type": "string", "enum": J_FIELDS}},
            "previous_job_info": {"type": ["array", "null"]},
            "previous_log_serial": {"type": ["integer", "null"]},
        },
    },
    "JobChange": {
        "oneOf": [
            {"type": "null"},
            obj({"job_info": LIST, "log_entries": LIST}, ["job_info", "log_entries"]),
        ]
    },
}

# luxid's DrainStatus, DrainPlan, WhyJob and BudgetRow, the Event of GET /2/events (each
# one's `data:`) and the AuditEntry of GET /2/audit, derived from the stub's Structs so the document cannot drift.
SCHEMAS.update(
    msgspec.json.schema_components(
        [DrainStatus, DrainPlan, WhyJob, Event, BudgetRow, AuditEntry],
        ref_template="#/components/schemas/{name}",
    )[1]
)
SCHEMAS.update(
    {
        "DrainBody": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "deadline": {
                    "description": 'seconds from now (0: now), a duration such as "1h30m", '
                    "or null for no deadline; default 3600",
                    "oneOf": [{"type": "number", "minimum": 0}, STR, {"type": "null"}],
                },
                "max_parallel": {"type": "integer", "minimum": 1, "default": 1},
                "priority": {
                    "type": "integer",
                    "minimum": PRIORITIES.start,
                    "maximum": PRIORITIES.stop - 1,
                    "default": 0,
                },
                "message": {"type": "string", "default": ""},
                "start_at": {
                    "description": "start then (seconds since the epoch): until then the drain "
                    "is scheduled and changes nothing, and the deadline counts from it; a "
                    "time already past starts it now; null or absent: now",
                    "oneOf": [
                        {"type": "number", "minimum": 0, "maximum": START_AT_MAX},
                        {"type": "null"},
                    ],
                },
            },
        },
        "NodeRole": {"type": "string", "enum": sorted(ROLE_NAMES.values())},
        "NodeRoleBody": {"type": "string", "enum": sorted(ROLE_FLAGS)},
        "EvacuateBody": {
            "type": "object",
            "additionalProperties": False,
            "properties": {
                "mode": {"type": "string", "enum": list(EVAC_MODES)},
                "iallocator": {"type": "string", "description": "accepted; placement decides"},
                "remote_node": {"type": "null", "description": "placement chooses targets"},
                "early_release": {"type": "boolean"},
            },
        },
    }
)

POSITIVE = {"type": "integer", "minimum": 1}
NODE_OR_NULL = {"type": ["string", "null"], "description": "a node name; absent: placement"}
IGNORED = {"description": "accepted; nothing to change here"}


def params_body(names: tuple[str, ...], **props: dict[str, Any]) -> dict[str, Any]:
    """A body of Ganeti's parameters `names` (each with its schema in `props`, else
    accepted as IGNORED); no others."""
    return {
        "type": "object",
        "additionalProperties": False,
        "properties": {name: props.get(name, IGNORED) for name in names},
    }


# Ganeti's instance operations (rapi.instanceops, docs/rapi-instances.md).
SCHEMAS.update(
    {
        "InstanceCreateBody": {
            "type": "object",
            "description": "Ganeti's instance creation request version 1; other fields "
            "(os, hypervisor, osparams, snode, iallocator …) are accepted and ignored",
            "required": [REQ_DATA_VERSION, "mode", "name", "disk_template", "disks", "nics"],
            "properties": {
                REQ_DATA_VERSION: {"const": 1},
                "mode": {"const": CREATE_MODE},
                "name": STR,
                "disk_template": {"type": "string", "description": "accepted; shared storage"},
                "disks": {
                    "type": "array",
                    "items": obj(
                        {
                            "size": {**POSITIVE, "description": "MiB"},
                            "mode": {"enum": ["rw", "ro"]},
                        },
                        ["size"],
                    ),
                },
                "nics": {
                    "type": "array",
                    "items": {"type": "object", "description": "its contents are ignored"},
                },
                "beparams": {
                    "type": "object",
                    "description": "maxmem (or memory) is required",
                    "properties": {
                        "maxmem": {**POSITIVE, "description": "MiB"},
                        "memory": {**POSITIVE, "description": "MiB (Ganeti's older name)"},
                        "vcpus": {**POSITIVE, "default": DEFAULT_VCPUS},
                    },
                },
                "pnode": NODE_OR_NULL,
                "start": {"type": "boolean", "default": True},
            },
        },
        "InstanceRemoveBody": params_body(DELETE_PARAMS),
        "MigrateBody": params_body(
            MIGRATE_PARAMS,
            mode={"enum": [*MIGRATION_MODES, None]},
            cleanup={"const": False, "description": "true is refused: nothing to clean up"},
            target_node=NODE_OR_NULL,
        ),
        "FailoverBody": params_body(FAILOVER_PARAMS, target_node=NODE_OR_NULL),
        "ShutdownBody": params_body(SHUTDOWN_PARAMS),
        "StartupBody": params_body(STARTUP_PARAMS),
        "PriorityBody": obj(
            {
                "priority": {
                    "type": "integer",
                    "minimum": PRIORITIES.start,
                    "maximum": PRIORITIES.stop - 1,
                }
            },
            ["priority"],
        ),
        "TokenBody": obj(
            {
                "user": STR,
                "roles": {
                    "type": ["array", "null"],
                    "items": {"type": "string", "enum": list(ROLES)},
                    "description": "at most the user's roles; null: all of them",
                },
                "expires": {
                    "type": ["string", "null"],
                    "example": "30d",
                    "description": "lifetime (90s, 15m, 2h, 30d); null: never",
                },
            },
            ["user"],
        ),
        "NewToken": obj(
            {
                "id": STR,
                "token": {**STR, "description": "shown once; the file keeps its SHA-256"},
                "user": STR,
                "roles": {"type": ["array", "null"], "items": STR},
                "expires": {"type": ["number", "null"], "description": "epoch seconds"},
            },
            ["id", "token", "user", "roles", "expires"],
        ),
    }
)

BULK = Param("bulk", "query", {"type": "integer", "enum": [0, 1]}, "1 for full objects")
JOB_ID = Param("job_id", "path", {"type": "integer", "minimum": 1}, "job id")
UUID = Param("uuid", "path", {"type": "string", "format": "uuid"}, "filter rule uuid")
NAME = Param("name", "path", {"type": "string"}, "name (or uuid)")
TOPICS = Param(
    "topics",
    "query",
    {"type": "string", "example": "job,drain"},
    f"comma-separated topics ({', '.join(TOPIC_NAMES)}); default every topic but lock",
)


def list_of(item: str, bulk_item: str) -> dict[str, Any]:
    """A list answer: plain items (`?bulk=0`) or full objects (`?bulk=1`)."""
    return {"type": "array", "items": {"oneOf": [ref(item), ref(bulk_item)]}}
