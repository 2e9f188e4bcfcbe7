"""The opcode library of jobproc (docs/contracts.md#job-processes-and-opcodes): registry,
parameter Structs, lock plans, execution.

Cheap to import (luxid imports the registry to validate opcodes at submit time): the
built-in opcode modules load on the registry's first lookup, plugins on the first lookup
the built-ins cannot answer.

    from jobproc.opcodes import validate_opcode, build_opcode
    op_id, params = validate_opcode({"OP_ID": "OP_TEST_DELAY", "duration": 1})
"""

from jobproc.locks import BGL, LockMode, LockPhase, LockPlan, lock, lock_sort_key, lockset
from jobproc.opcodes.base import COMMON_PARAMS, OpCode, OpParams
from jobproc.opcodes.context import ConfigReader, ConfigWriter, OpContext
from jobproc.opcodes.errors import Canceled, OpExecError
from jobproc.opcodes.registry import (
    ENTRY_POINT_GROUP,
    REGISTRY,
    OpcodeRegistry,
    build_opcode,
    get_opcode_class,
    known_op_ids,
    register_opcode,
    validate_job,
    validate_opcode,
)

__all__ = [
    "BGL",
    "COMMON_PARAMS",
    "ENTRY_POINT_GROUP",
    "REGISTRY",
    "Canceled",
    "ConfigReader",
    "ConfigWriter",
    "LockMode",
    "LockPhase",
    "LockPlan",
    "OpCode",
    "OpContext",
    "OpExecError",
    "OpParams",
    "OpcodeRegistry",
    "build_opcode",
    "get_opcode_class",
    "known_op_ids",
    "lock",
    "lock_sort_key",
    "lockset",
    "register_opcode",
    "validate_job",
    "validate_opcode",
]
