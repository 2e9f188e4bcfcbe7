"""The query_jobs fields (docs/contracts.md#job-methods) of a job, as plain JSON values
(pure).

Values are builtins (lists, dicts, floats, None) so the daemon can encode them directly and
wait_for_job_change can compare them with the `prev_values` a client sent back.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from client import errors
from luxid.jobs.model import Job, OpCode, job_priority, job_status

# The parameter shown in an opcode's summary, as Ganeti's opSummaryVal (OpCodes.hs).
SUMMARY_FIELDS: dict[str, str] = {
    "OP_TEST_DELAY": "duration",
    "OP_CLUSTER_RENAME": "name",
    "OP_NODE_ADD": "node_name",
    "OP_NODE_REMOVE": "node_name",
    "OP_NODE_SET_PARAMS": "node_name",
    "OP_NODE_EVACUATE": "node_name",
    "OP_INSTANCE_CREATE": "instance_name",
    "OP_INSTANCE_REMOVE": "instance_name",
    "OP_INSTANCE_MIGRATE": "instance_name",
    "OP_INSTANCE_REPLACE_DISKS": "instance_name",
}


def register_summary_field(op_id: str, param: str) -> None:
    """Name the parameter a (third-party) opcode's summary shows, e.g. "instance_name"."""
    SUMMARY_FIELDS[op_id] = param


def _summary_value(value: Any) -> str:
    if isinstance(value, list | tuple):
        return ",".join(str(v) for v in value)
    return str(value)


def op_subject(op_input: dict[str, Any]) -> str | None:
    """The value of an opcode's describing param as text ("web1"), None if it has none.

    OP_TEST_DELAY shows its duration as a float ("2.0"), as Ganeti's `show`.
    """
    op_id = str(op_input.get("OP_ID", ""))
    param = SUMMARY_FIELDS.get(op_id)
    if param is None or param not in op_input:
        return None
    value = op_input[param]
    if op_id == "OP_TEST_DELAY" and isinstance(value, int | float) and not isinstance(value, bool):
        value = float(value)
    return _summary_value(value)


def op_summary(op_input: dict[str, Any]) -> str:
    """Ganeti's opSummary: OP_ID without "OP_", plus "(<value>)" of its describing param."""
    op_id = str(op_input.get("OP_ID", ""))
    text = op_id[3:] if op_id.startswith("OP_") else op_id
    subject = op_subject(op_input)
    return text if subject is None else f"{text}({subject})"


def _per_op(fn: Callable[[OpCode], Any]) -> Callable[[Job], list[Any]]:
    return lambda job: [fn(op) for op in job.ops]


FIELD_GETTERS: Final[dict[str, Callable[[Job], Any]]] = {
    "id": lambda job: job.id,
    "status": job_status,
    "priority": job_priority,
    "summary": _per_op(lambda op: op_summary(op.input)),
    "ops": _per_op(lambda op: op.input),
    "opstatus": _per_op(lambda op: op.status),
    "opresult": _per_op(lambda op: op.result),
    "oplog": _per_op(lambda op: [e.to_list() for e in op.log]),
    "oppriority": _per_op(lambda op: op.priority),
    "opstart": _per_op(lambda op: op.start_ts),
    "opexec": _per_op(lambda op: op.exec_ts),
    "opend": _per_op(lambda op: op.end_ts),
    "received_ts": lambda job: job.received_ts,
    "start_ts": lambda job: job.start_ts,
    "end_ts": lambda job: job.end_ts,
    "archived": lambda job: job.archived,
    "pending_reason": lambda job: job.pending_reason,
    "process_id": lambda job: job.process_id,
    "depends": lambda job: [d.to_list() for d in job.depends],
}

JOB_FIELDS: Final[tuple[str, ...]] = tuple(FIELD_GETTERS)


def validate_fields(fields: Iterable[Any]) -> list[str]:
    """The field list, checked: unknown (or non-string) names raise InvalidParams naming them."""
    if isinstance(fields, str) or not isinstance(fields, Iterable):
        raise errors.InvalidParams("fields must be a list of field names")
    out = list(fields)
    unknown = [f for f in out if not isinstance(f, str) or f not in FIELD_GETTERS]
    if unknown:
        raise errors.InvalidParams(
            f"fields: unknown job field(s) {', '.join(map(repr, unknown))}",
            {"param": "fields", "unknown": [str(u) for u in unknown]},
        )
    return out


def job_fields(job: Job, fields: Sequence[str]) -> list[Any]:
    """The values of `fields` for `job`, in order (query_jobs row)."""
    try:
        return [FIELD_GETTERS[f](job) for f in fields]
    except (KeyError, TypeError):
        validate_fields(fields)
        raise
