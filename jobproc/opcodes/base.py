"""The opcode base class and the parameter base Struct every opcode shares
(docs/contracts.md#job-processes-and-opcodes).

Common parameters — `priority`, `depends`, `reason`, `comment` — are fields of the
shared base Struct `OpParams`, so every opcode accepts and validates them the same way
and the job process reads them from the decoded params (nothing is stripped).  Any other
unknown field is refused (`forbid_unknown_fields`).

Cheap to import (msgspec and the standard library only): luxid imports it through the
registry for submit-time validation.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Generic, TypeVar

import msgspec
from msgspec import Meta

from client.api.numbers import Priority
from client.api.opcodes import JobDependency, ReasonEntry
from client.names import HOST_NAME_PATTERN as NAME_PATTERN
from client.names import TAG_PATTERN
from client.vocabulary import COMMON_OPCODE_PARAMS, DEFAULT_PRIORITY
from jobproc.locks.plan import LockPlan

if TYPE_CHECKING:
    from jobproc.opcodes.context import ConfigReader, OpContext

COMMON_PARAMS = COMMON_OPCODE_PARAMS

# A node, instance, node group or network name: a host name (client.names; a lock member
# too, since it has no '/' and is never "[lockset]").
Name = Annotated[str, Meta(min_length=1, max_length=253, pattern=NAME_PATTERN)]
Tag = Annotated[str, Meta(min_length=1, max_length=128, pattern=TAG_PATTERN)]
MAC_PREFIX_PATTERN = r"^[0-9a-fA-F]{2}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2}$"
MacPrefix = Annotated[str, Meta(pattern=MAC_PREFIX_PATTERN)]


def param_error(path: str, message: str) -> ValueError:
    """A ValueError for a __post_init__ check that names the offending parameter.

    The " - at `$.path`" suffix is msgspec's own convention, so the registry reports it
    like any other validation error.
    """
    return ValueError(f"{message} - at `$.{path}`")


class OpParams(msgspec.Struct, forbid_unknown_fields=True, kw_only=True):
    """Parameters common to every opcode; each opcode's Params Struct subclasses this.

    `priority` -20 … 19 (lower is more urgent), `depends` ``[[job_id, [status…]]]``,
    `reason` ``[[source, text, timestamp_ns]]``, `comment` free text, `ignore_budgets` an
    operator's override of the disruption budgets (luxid judges it before the job starts).
    """

    priority: Priority = DEFAULT_PRIORITY
    depends: list[JobDependency] | None = None
    reason: list[ReasonEntry] | None = []  # null is accepted and becomes []
    comment: str | None = None
    ignore_budgets: bool = False

    def __post_init__(self) -> None:
        if self.reason is None:
            self.reason = []
        for i, (job_id, _) in enumerate(self.depends or ()):
            if job_id == 0:
                raise param_error(
                    f"depends[{i}][0]", "job ids are positive (negative ones are relative)"
                )
        self.check()

    def check(self) -> None:
        """Cross-field checks of an opcode; raise `param_error(...)` on a bad value."""


P = TypeVar("P", bound=OpParams)


class OpCode(ABC, Generic[P]):
    """One kind of operation: its OP_ID, its Params Struct, its locks and its execution.

    The job process builds ``op = cls(params)``, acquires ``op.locks(params, config)``
    phase by phase, then calls ``op.execute(ctx)`` on the same instance (a lock-plan
    resolver may remember a choice, such as the node picked for a new instance, on it).
    `execute` returns a JSON value (the opcode result) or raises `OpExecError`.
    """

    OP_ID: ClassVar[str]
    Params: ClassVar[type[OpParams]]
    # The parameter shown in the job summary, as Ganeti's OP_DSC_FIELD ("NODE_ADD(n1)").
    SUMMARY_FIELD: ClassVar[str | None] = None
    # True if `ctx.sleep` may raise Canceled inside `execute`
    # (docs/contracts.md#job-methods, cancel_job: a running job cancels inside an opcode
    # only if it declares itself interruptible).
    INTERRUPTIBLE: ClassVar[bool] = False

    def __init__(self, params: P) -> None:
        self.params = params

    @abstractmethod
    def locks(self, params: P, config: ConfigReader) -> LockPlan:
        """The locks this opcode needs; `params` is `self.params`."""

    @abstractmethod
    def execute(self, ctx: OpContext) -> Any:
        """Do the work with the locks held; returns the opcode's result."""

    @classmethod
    def summary(cls, params: OpParams) -> str:
        """Ganeti-style summary: OP_ID without "OP_", plus the summary field's value."""
        text = cls.OP_ID.removeprefix("OP_")
        if cls.SUMMARY_FIELD is None:
            return text
        value = getattr(params, cls.SUMMARY_FIELD, None)
        if isinstance(value, list | tuple):
            value = ",".join(str(v) for v in value)
        return f"{text}({value})"
