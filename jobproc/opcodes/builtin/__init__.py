"""The built-in opcodes of SPEC §7, imported by the registry on its first lookup."""

from __future__ import annotations

from typing import Any

from jobproc.opcodes.base import OpCode
from jobproc.opcodes.builtin.cluster import ClusterRename, ClusterSetParams, ClusterVerify
from jobproc.opcodes.builtin.debug import TestDelay
from jobproc.opcodes.builtin.instance import (
    InstanceCreate,
    InstanceMigrate,
    InstanceRemove,
    InstanceReplaceDisks,
)
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
    "InstanceMigrate",
    "InstanceRemove",
    "InstanceReplaceDisks",
    "NodeAdd",
    "NodeEvacuate",
    "NodeRemove",
    "NodeSetParams",
    "TestDelay",
]
