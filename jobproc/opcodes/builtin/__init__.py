"""The built-in opcodes (docs/contracts.md#job-processes-and-opcodes), imported by the
registry on its first lookup."""

from __future__ import annotations

from typing import Any

from jobproc.opcodes.base import OpCode
from jobproc.opcodes.builtin.cluster import ClusterRename, ClusterSetParams, ClusterVerify
from jobproc.opcodes.builtin.debug import TestDelay
from jobproc.opcodes.builtin.instance import InstanceCreate, InstanceRemove, InstanceReplaceDisks
from jobproc.opcodes.builtin.instance_move import InstanceFailover, InstanceMigrate
from jobproc.opcodes.builtin.instance_state import InstanceShutdown, InstanceStartup
from jobproc.opcodes.builtin.node import NodeAdd, NodeEvacuate, NodeRemove, NodeSetParams

BUILTIN_OPCODES: tuple[type[OpCode[Any]], ...] = (
    TestDelay,
    ClusterRename,
    ClusterSetParams,
    NodeAdd,
    NodeRemove,
    NodeSetParams,
    InstanceCreate,
    InstanceRemove,
    InstanceMigrate,
    InstanceFailover,
    InstanceStartup,
    InstanceShutdown,
    InstanceReplaceDisks,
    NodeEvacuate,
    ClusterVerify,
)

__all__ = [
    "BUILTIN_OPCODES",
    "ClusterRename",
    "ClusterSetParams",
    "ClusterVerify",
    "InstanceCreate",
    "InstanceFailover",
    "InstanceMigrate",
    "InstanceRemove",
    "InstanceReplaceDisks",
    "InstanceShutdown",
    "InstanceStartup",
    "NodeAdd",
    "NodeEvacuate",
    "NodeRemove",
    "NodeSetParams",
    "TestDelay",
]
