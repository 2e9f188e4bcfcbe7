"""A submitted job's opcodes, checked against jobproc's opcode registry before the queue
stores the job.

Every job luxid stores passes here first: a client's (submit_job, submit_many_jobs) and a
drain's own (its migrations and markings).  luxid reads jobproc's opcode registry and
nothing else of jobproc.
"""

from __future__ import annotations

from client.api.luxi import Opcode
from jobproc.opcodes.registry import get_opcode_class, validate_job
from luxid.jobs import register_summary_field, validate_ops
from luxid.jobs.fields import SUMMARY_FIELDS


def check_job(ops: list[Opcode]) -> None:
    """A submitted job's opcodes, checked (InvalidParams / InvalidOpcode naming op and
    param); a third-party opcode's summary field is learned on the way."""
    validate_ops(ops)
    for op_id, _params in validate_job(ops):
        if op_id not in SUMMARY_FIELDS:
            field = get_opcode_class(op_id).SUMMARY_FIELD
            if field is not None:
                register_summary_field(op_id, field)
