"""Instance opcodes: create, remove, replace disks (simulated data plane).  Moves
(migrate, failover) are in `instance_move`, startup and shutdown in `instance_state`.

Instance opcodes lock in two phases, as Ganeti's DeclareLocks: first instance/<name>,
then — reading the configuration that lock now protects — the nodes the instance uses.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from client.errors import AlreadyExists
from jobproc.locks import EXCLUSIVE, SHARED, LockPhase, LockPlan, lock, lockset
from jobproc.opcodes.base import Name, OpCode, OpParams
from jobproc.opcodes.builtin._common import (
    check_eligible,
    check_room,
    exists,
    get_or_fail,
    instance_nodes,
    instance_plan,
    node_lock_name,
    nodes_phase,
    place,
)
from jobproc.opcodes.context import ConfigReader, OpContext
from jobproc.opcodes.errors import ECODE_EXISTS, ECODE_INVAL, ECODE_STATE, OpExecError

MAX_DISKS = 16  # Ganeti's limits
MAX_NICS = 8


class DiskSpec(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One disk of a new instance: size in MiB, access mode."""

    size: Annotated[int, Meta(ge=1)]
    mode: Literal["rw", "ro"] = "rw"


class InstanceCreateParams(OpParams):
    """memory in MiB; pnode by name, or absent to let placement choose
    (docs/contracts.md#room-on-nodes)."""

    instance_name: Name
    memory: Annotated[int, Meta(ge=1)]
    vcpus: Annotated[int, Meta(ge=1)]
    disks: Annotated[list[DiskSpec], Meta(max_length=MAX_DISKS)]
    pnode: Name | None = None
    nics: Annotated[int, Meta(ge=0, le=MAX_NICS)] = 1


class InstanceCreate(OpCode[InstanceCreateParams]):
    """Add an instance (admin_state "up") with fresh MACs; result
    ``{"name", "uuid", "primary_node", "macs"}``.

    Without pnode the node is the eligible one (online, not drained, vm_capable) with room
    and the most free memory, then the first by name (docs/contracts.md#room-on-nodes) —
    chosen while holding node/[lockset] shared, so no node changes during the choice.  The
    room is checked again under node/<pnode> exclusive: a named node without room fails
    (OpPrereqError).
    """

    OP_ID = "OP_INSTANCE_CREATE"
    Params = InstanceCreateParams
    SUMMARY_FIELD = "instance_name"

    def __init__(self, params: InstanceCreateParams) -> None:
        super().__init__(params)
        self.pnode: str | None = params.pnode

    def locks(self, params: InstanceCreateParams, config: ConfigReader) -> LockPlan:
        """instance/<name> ex; node/<pnode> and node-res/<pnode> ex.  Without pnode:
        phase 0 adds node/[lockset] shared, phase 1 chooses the node, releases the
        lockset and takes node/<chosen> and node-res/<chosen> exclusive."""
        inst = (lock("instance", params.instance_name), EXCLUSIVE)
        if params.pnode is not None:
            self.pnode = node_lock_name(config, params.pnode)
            return LockPlan.single(
                [
                    inst,
                    (lock("node", self.pnode), EXCLUSIVE),
                    (lock("node-res", self.pnode), EXCLUSIVE),
                ]
            )
        self.pnode = None
        return LockPlan(phases=(LockPhase.of([inst, (lockset("node"), SHARED)]), self._choose))

    def _choose(self, config: ConfigReader) -> LockPhase:
        """Phase 1: place the instance (node/[lockset] shared is held)."""
        p = self.params
        self.pnode = place(config, p.instance_name, p.memory, p.vcpus).name
        return LockPhase.of(
            [(lock("node", self.pnode), EXCLUSIVE), (lock("node-res", self.pnode), EXCLUSIVE)],
            release=[lockset("node")],
        )

    def execute(self, ctx: OpContext) -> dict[str, Any]:
        """Check name and node, reserve MACs, add the instance."""
        p = self.params
        if self.pnode is None:
            raise RuntimeError("locks() must have chosen the primary node before execute()")
        if exists(ctx, "instance", p.instance_name):
            raise OpExecError(f"instance {p.instance_name!r} already exists", ECODE_EXISTS)
        pnode = get_or_fail(ctx, "node", self.pnode)
        check_eligible(pnode, f"create instance {p.instance_name!r} on it")
        check_room(ctx, pnode, p.instance_name, p.memory, p.vcpus)
        macs = [ctx.generate_mac() for _ in range(p.nics)]
        instance = {
            "name": p.instance_name,
            "primary_node": pnode["uuid"],
            "secondary_nodes": [],
            "memory": p.memory,
            "vcpus": p.vcpus,
            "disks": [{"uuid": str(uuid.uuid4()), "size": d.size, "mode": d.mode} for d in p.disks],
            "nics": [{"mac": mac, "ip": None, "network": None} for mac in macs],
            "admin_state": "up",
        }
        try:
            added = ctx.add_object("instance", instance)
        except AlreadyExists as exc:
            raise OpExecError(
                f"cannot create instance {p.instance_name!r}: {exc.message}", ECODE_EXISTS
            ) from None
        ctx.log(f"Instance {p.instance_name!r} created on node {pnode['name']!r}")
        return {
            "name": p.instance_name,
            "uuid": added["uuid"],
            "primary_node": pnode["name"],
            "macs": macs,
        }


class InstanceRemoveParams(OpParams):
    """The instance to remove."""

    instance_name: Name


class InstanceRemove(OpCode[InstanceRemoveParams]):
    """Remove an instance from the configuration; result null."""

    OP_ID = "OP_INSTANCE_REMOVE"
    Params = InstanceRemoveParams
    SUMMARY_FIELD = "instance_name"

    def locks(self, params: InstanceRemoveParams, config: ConfigReader) -> LockPlan:
        """instance/<name> ex, then (phase 1) node/<n> ex for each of its nodes."""
        name = params.instance_name
        return instance_plan(name, lambda cfg: nodes_phase(cfg, name, res=False))

    def execute(self, ctx: OpContext) -> None:
        """Remove the instance."""
        inst = get_or_fail(ctx, "instance", self.params.instance_name)
        ctx.remove_object("instance", inst["uuid"])
        ctx.log(f"Instance {inst['name']!r} removed")


class InstanceReplaceDisksParams(OpParams):
    """mode as Ganeti's (without replace_new_secondary); duration simulates the copy."""

    instance_name: Name
    mode: Literal["replace_on_primary", "replace_on_secondary", "replace_auto"]
    duration: Annotated[float, Meta(ge=0)] = 0.0


class InstanceReplaceDisks(OpCode[InstanceReplaceDisksParams]):
    """Simulate replacing an instance's disks: log per node and wait `duration`; result null.

    replace_on_primary works on the primary, replace_on_secondary on the secondaries
    (an error without any), replace_auto on all nodes.  The nodes must be online.  The
    wait is not interruptible: half-replaced disks are worse than a late cancel.
    """

    OP_ID = "OP_INSTANCE_REPLACE_DISKS"
    Params = InstanceReplaceDisksParams
    SUMMARY_FIELD = "instance_name"

    def locks(self, params: InstanceReplaceDisksParams, config: ConfigReader) -> LockPlan:
        """instance/<name> ex, then (phase 1) its nodes and their node-res ex."""
        name = params.instance_name
        return instance_plan(name, lambda cfg: nodes_phase(cfg, name, res=True))

    def execute(self, ctx: OpContext) -> None:
        """Pick the nodes for the mode, check them, log and wait."""
        p = self.params
        inst = get_or_fail(ctx, "instance", p.instance_name)
        nodes = instance_nodes(inst)
        if p.mode == "replace_on_primary":
            targets = nodes[:1]
        elif p.mode == "replace_on_secondary":
            targets = nodes[1:]
            if not targets:
                raise OpExecError(f"instance {inst['name']!r} has no secondary node", ECODE_INVAL)
        else:
            targets = nodes
        target_nodes = [get_or_fail(ctx, "node", n) for n in targets]
        for node in target_nodes:
            if node.get("offline"):
                raise OpExecError(f"node {node['name']!r} is offline", ECODE_STATE)
        for node in target_nodes:
            ctx.log(f"Replacing disks of instance {inst['name']!r} on node {node['name']!r}")
        ctx.sleep(p.duration)
        ctx.log(f"Disks of instance {inst['name']!r} replaced")
