"""Instance opcodes: create, remove, migrate, replace disks (simulated data plane).

Instance opcodes lock in two phases, as Ganeti's DeclareLocks: first instance/<name>,
then — reading the configuration that lock now protects — the nodes the instance uses.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from client.errors import AlreadyExists, NotFound
from jobproc.locks import EXCLUSIVE, SHARED, LockPhase, LockPlan, lock, lockset
from jobproc.opcodes.base import Name, OpCode, OpParams
from jobproc.opcodes.builtin._common import (
    check_eligible,
    exists,
    get_or_fail,
    instance_nodes,
    least_loaded_node,
    node_name,
)
from jobproc.opcodes.context import ConfigReader, OpContext
from jobproc.opcodes.errors import ECODE_EXISTS, ECODE_INVAL, ECODE_STATE, OpExecError

MAX_DISKS = 16  # Ganeti's limits
MAX_NICS = 8


def _node_lock_name(config: ConfigReader, key: str) -> str:
    """The name a node is locked under, for a node given by name or uuid."""
    try:
        return str(config.get_object("node", key)["name"])
    except NotFound:
        return key  # locks need not exist; execute reports the missing node


def _nodes_phase(config: ConfigReader, instance_name: str, *, res: bool) -> LockPhase:
    """node/<n> (and node-res/<n> if `res`) exclusive for every node of the instance."""
    inst = get_or_fail(config, "instance", instance_name)
    names = [node_name(config, n) for n in instance_nodes(inst)]
    levels = ("node", "node-res") if res else ("node",)
    return LockPhase.of((lock(lv, n), EXCLUSIVE) for n in names for lv in levels)


class DiskSpec(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One disk of a new instance: size in MiB, access mode."""

    size: Annotated[int, Meta(ge=1)]
    mode: Literal["rw", "ro"] = "rw"


class InstanceCreateParams(OpParams):
    """memory in MiB; pnode by name, or absent to pick the least loaded eligible node."""

    instance_name: Name
    memory: Annotated[int, Meta(ge=1)]
    vcpus: Annotated[int, Meta(ge=1)]
    disks: Annotated[list[DiskSpec], Meta(max_length=MAX_DISKS)]
    pnode: Name | None = None
    nics: Annotated[int, Meta(ge=0, le=MAX_NICS)] = 1


class InstanceCreate(OpCode[InstanceCreateParams]):
    """Add an instance (admin_state "up") with fresh MACs; result
    ``{"name", "uuid", "primary_node", "macs"}``.

    Without pnode the node is the eligible one (online, not drained, vm_capable) with the
    least memory of primary instances, then the fewest of them, then the first by name —
    chosen while holding node/[lockset] shared, so no node changes during the choice.
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
            self.pnode = _node_lock_name(config, params.pnode)
            return LockPlan.single(
                [inst, (lock("node", self.pnode), EXCLUSIVE),
                 (lock("node-res", self.pnode), EXCLUSIVE)]
            )
        self.pnode = None
        return LockPlan(phases=(LockPhase.of([inst, (lockset("node"), SHARED)]), self._choose))

    def _choose(self, config: ConfigReader) -> LockPhase:
        """Phase 1: pick the least loaded eligible node (node/[lockset] shared is held)."""
        node = least_loaded_node(config, purpose=f"create instance {self.params.instance_name!r}")
        self.pnode = str(node["name"])
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
        macs = [ctx.generate_mac() for _ in range(p.nics)]
        instance = {
            "name": p.instance_name,
            "primary_node": pnode["uuid"],
            "secondary_nodes": [],
            "memory": p.memory,
            "vcpus": p.vcpus,
            "disks": [{"uuid": str(uuid.uuid4()), "size": d.size, "mode": d.mode}
                      for d in p.disks],
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
        return {"name": p.instance_name, "uuid": added["uuid"],
                "primary_node": pnode["name"], "macs": macs}


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
        return LockPlan(phases=(
            LockPhase.of([(lock("instance", name), EXCLUSIVE)]),
            lambda cfg: _nodes_phase(cfg, name, res=False),
        ))

    def execute(self, ctx: OpContext) -> None:
        """Remove the instance."""
        inst = get_or_fail(ctx, "instance", self.params.instance_name)
        ctx.remove_object("instance", inst["uuid"])
        ctx.log(f"Instance {inst['name']!r} removed")


class InstanceMigrateParams(OpParams):
    """The instance and, optionally, the node to move it to (by name)."""

    instance_name: Name
    target_node: Name | None = None


class InstanceMigrate(OpCode[InstanceMigrateParams]):
    """Move an instance's primary role to another node; result
    ``{"instance", "source", "target"}`` (node names).

    Target: target_node, else the first secondary node, else the least loaded eligible
    node other than the source.  Migrating to a secondary swaps the two roles (as DRBD);
    to another node, the secondaries stay.  The target must be online, not drained and
    vm_capable; the source may be anything (evacuating an offline node is the point).
    """

    OP_ID = "OP_INSTANCE_MIGRATE"
    Params = InstanceMigrateParams
    SUMMARY_FIELD = "instance_name"

    def __init__(self, params: InstanceMigrateParams) -> None:
        super().__init__(params)
        self.source: str | None = None  # node uuid, read under the instance lock
        self.target: str | None = None  # node name (the lock's name)

    def locks(self, params: InstanceMigrateParams, config: ConfigReader) -> LockPlan:
        """instance/<name> ex, then (phase 1) the source and target nodes ex."""
        return LockPlan(phases=(
            LockPhase.of([(lock("instance", params.instance_name), EXCLUSIVE)]),
            self._nodes,
        ))

    def _nodes(self, config: ConfigReader) -> LockPhase:
        """Phase 1: find source and target under the instance lock."""
        inst = get_or_fail(config, "instance", self.params.instance_name)
        self.source = str(inst["primary_node"])
        secondaries = [s for s in inst.get("secondary_nodes") or () if s != self.source]
        if self.params.target_node is not None:
            self.target = _node_lock_name(config, self.params.target_node)
        elif secondaries:
            self.target = node_name(config, secondaries[0])
        else:
            node = least_loaded_node(
                config, exclude=[self.source],
                purpose=f"migrate instance {self.params.instance_name!r} to",
            )
            self.target = str(node["name"])
        return LockPhase.of([(lock("node", node_name(config, self.source)), EXCLUSIVE),
                             (lock("node", self.target), EXCLUSIVE)])

    def execute(self, ctx: OpContext) -> dict[str, Any]:
        """Check the target and rewrite the instance's node roles."""
        if self.source is None or self.target is None:
            raise RuntimeError("locks() must have resolved the nodes before execute()")
        inst = get_or_fail(ctx, "instance", self.params.instance_name)
        if inst["primary_node"] != self.source:  # impossible while the instance lock holds
            raise OpExecError(f"instance {inst['name']!r} moved while its locks were taken")
        target = get_or_fail(ctx, "node", self.target)
        source_name = node_name(ctx, self.source)
        if target["uuid"] == self.source:
            raise OpExecError(
                f"instance {inst['name']!r} is already on node {target['name']!r}", ECODE_INVAL
            )
        check_eligible(target, f"migrate instance {inst['name']!r} to it")
        secondaries = [
            self.source if s == target["uuid"] else s for s in inst.get("secondary_nodes") or ()
        ]
        ctx.log(f"Migrating instance {inst['name']!r} from {source_name!r} to {target['name']!r}")
        ctx.update_object(
            "instance", {**inst, "primary_node": target["uuid"], "secondary_nodes": secondaries}
        )
        return {"instance": inst["name"], "source": source_name, "target": target["name"]}


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
        return LockPlan(phases=(
            LockPhase.of([(lock("instance", name), EXCLUSIVE)]),
            lambda cfg: _nodes_phase(cfg, name, res=True),
        ))

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
                raise OpExecError(
                    f"instance {inst['name']!r} has no secondary node", ECODE_INVAL
                )
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
