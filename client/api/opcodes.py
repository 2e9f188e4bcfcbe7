"""The common params of an opcode, typed once, and their check at the edge
(docs/contracts.md#job-model).

Every opcode accepts `priority`, `depends`, `reason`, `comment` and `ignore_budgets` besides
its own params;
what they may hold is declared here with msgspec, from the vocabulary's names and ranges.
luxid's submit uses `check_opcodes` through the declaration of `submit_job`, so a malformed
common param is InvalidOpcode naming the OP_ID and the param before luxid sees the job.
"""

from __future__ import annotations

import re
from typing import Annotated, Any

import msgspec
from msgspec import Meta

from client.api.numbers import Priority
from client.errors import InvalidOpcode
from client.vocabulary import DEFAULT_PRIORITY, FinalizedStatus

JobDependency = tuple[int, list[FinalizedStatus]]
"""A `depends` entry [job_id, [status…]]; a negative id is relative to the job's own."""

ReasonEntry = tuple[Annotated[str, Meta(min_length=1)], str, int]
"""A `reason` trail entry [source, text, timestamp_ns]."""


class OpcodeCommon(msgspec.Struct, kw_only=True):
    """The part of an opcode every opcode shares: its OP_ID and the common params.

    Unknown fields (the opcode's own params) are ignored here: they are the opcode
    registry's business.  Used to check submitted opcodes at the edge.
    """

    OP_ID: Annotated[str, Meta(pattern=r"^OP_.")]
    priority: Priority = DEFAULT_PRIORITY
    depends: list[JobDependency] | None = None
    reason: list[ReasonEntry] | None = None
    comment: str | None = None
    ignore_budgets: bool = False


def check_opcode_common(op: Any, index: int = 0) -> None:
    """InvalidOpcode naming the OP_ID and the param if `op` is not an object with an OP_ID
    "OP_…" and well-typed common params (priority in range, depends, reason, comment)."""
    if not isinstance(op, dict):
        raise InvalidOpcode(f"opcode {index} is not an object")
    op_id = op.get("OP_ID")
    if not isinstance(op_id, str) or not op_id.startswith("OP_") or len(op_id) <= 3:
        raise InvalidOpcode(f"opcode {index}: OP_ID missing or not a string 'OP_…'")
    try:
        common = msgspec.convert(op, OpcodeCommon, strict=True)
        if any(job_id == 0 for job_id, _ in common.depends or ()):
            raise msgspec.ValidationError(
                "job id 0 is no job (ids are > 0, or < 0 relative) - at `$.depends`"
            )
    except msgspec.ValidationError as exc:
        text, _, where = str(exc).partition(" - at `$.")
        param = re.split(r"[.\[`]", where, maxsplit=1)[0] or "?"
        raise InvalidOpcode(
            f"{op_id}: parameter '{param}' is invalid: {text}"
            + (f" (at {where.rstrip('`')})" if where else ""),
            {"op_id": op_id, "param": param},
        ) from None


def check_opcodes(ops: list[Any]) -> None:
    """`check_opcode_common` for each opcode of a job."""
    for index, op in enumerate(ops):
        check_opcode_common(op, index)
