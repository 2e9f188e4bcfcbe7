"""The README's "Writing an opcode" example is true: it registers, validates, plans its
locks and runs against the in-memory OpContext, as the README says."""

from __future__ import annotations

import re
import types
from pathlib import Path
from typing import Any

import pytest

from client.errors import LockNotHeld, NotFound
from jobproc.opcodes import OpCode, OpcodeRegistry

from .fakes import FakeContext, acquire

README = Path(__file__).resolve().parents[3] / "README.md"


def _example() -> types.ModuleType:
    """The README section's Python block, as the module `mypkg.ops` it says it is."""
    text = README.read_text()
    section = text[text.index("### Writing an opcode") :]
    code = re.search(r"```python\n(.*?)```", section, re.S)
    assert code is not None, "the section lost its example"
    module = types.ModuleType("mypkg.ops")
    exec(compile(code.group(1), "README.md (Writing an opcode)", "exec"), module.__dict__)
    return module


def test_the_entry_point_names_the_example_class() -> None:
    section = README.read_text().split("### Writing an opcode", 1)[1]
    assert 'OP_EXAMPLE_SET_MEMORY = "mypkg.ops:SetMemory"' in section
    assert '[project.entry-points."lockwarden.opcodes"]' in section


def test_the_example_runs_against_the_op_context() -> None:
    ops = _example()
    registry = OpcodeRegistry(builtins=False, group=None)
    registry.register(ops.SetMemory)
    op: OpCode[Any] = registry.build(
        {"OP_ID": "OP_EXAMPLE_SET_MEMORY", "instance_name": "i1", "memory": 2048}
    )

    ctx = FakeContext()
    ctx.node("n1")
    ctx.instance("i1", "n1", memory=512)
    with pytest.raises(LockNotHeld):  # execute needs the locks the plan names
        op.execute(ctx)
    assert [dict(phase.acquire) for phase in acquire(op, ctx)] == [
        {"cluster/BGL": "shared", "instance/i1": "exclusive"}
    ]
    assert op.execute(ctx) == 2
    assert ctx.get_object("instance", "i1")["memory"] == 2048
    assert ctx.messages() == ["i1: memory set to 2048 MiB"]

    ctx.locks.held.clear()
    missing = registry.build(
        {"OP_ID": "OP_EXAMPLE_SET_MEMORY", "instance_name": "ghost", "memory": 1}
    )
    acquire(missing, ctx)
    with pytest.raises(NotFound):
        missing.execute(ctx)
