"""Node opcodes: add, remove, set parameters, evacuate (one migration job per instance)."""

from __future__ import annotations

import contextlib
import ipaddress
from typing import Annotated, Any

from msgspec import Meta

from client.capacity import DEFAULT_CTOTAL, DEFAULT_MTOTAL
from client.errors import AlreadyExists, ConfigValidationError, NotFound, ReservationError
from jobproc.locks import EXCLUSIVE, SHARED, LockPlan, lock
from jobproc.opcodes.base import Name, OpCode, OpParams, param_error
from jobproc.opcodes.builtin._common import changed, exists, get_or_fail
from jobproc.opcodes.context import ConfigObject, ConfigReader, OpContext
from jobproc.opcodes.errors import ECODE_EXISTS, ECODE_STATE, OpExecError, OpPrereqError

IP_RESERVATION_NAMESPACE = "primary_ip"


MiB = Annotated[int, Meta(ge=0, le=2**40)]  # a node's memory for instances
Cpus = Annotated[int, Meta(ge=0, le=2**20)]  # a node's physical CPUs


class NodeAddParams(OpParams):
    """A new node in a node group (by name); primary_ip an IPv4 or IPv6 address;
    its capacity: mtotal MiB of memory for instances, ctotal physical CPUs."""

    node_name: Name
    group: Name = "default"
    primary_ip: str | None = None
    mtotal: MiB = DEFAULT_MTOTAL
    ctotal: Cpus = DEFAULT_CTOTAL

    def check(self) -> None:
        """primary_ip must parse as an IP address."""
        if self.primary_ip is not None:
            try:
                ipaddress.ip_address(self.primary_ip)
            except ValueError:
                raise param_error("primary_ip", "not an IP address") from None


class NodeAdd(OpCode[NodeAddParams]):
    """Add a node (online, not drained, vm_capable); result ``{"name", "uuid"}``.

    A given primary_ip must not be another node's; it is reserved (namespace
    "primary_ip") so that two concurrent adds cannot both take it.
    """

    OP_ID = "OP_NODE_ADD"
    Params = NodeAddParams
    SUMMARY_FIELD = "node_name"

    def locks(self, params: NodeAddParams, config: ConfigReader) -> LockPlan:
        """node/<name> exclusive, nodegroup/<group> shared (a group given by uuid is
        locked under its name, the name every other opcode uses)."""
        group = params.group
        with contextlib.suppress(NotFound):  # execute reports a missing group
            group = str(config.get_object("nodegroup", group)["name"])
        return LockPlan.single(
            [(lock("node", params.node_name), EXCLUSIVE), (lock("nodegroup", group), SHARED)]
        )

    def execute(self, ctx: OpContext) -> dict[str, Any]:
        """Check name, group and IP, then add the node."""
        p = self.params
        if exists(ctx, "node", p.node_name):
            raise OpExecError(f"node {p.node_name!r} already exists", ECODE_EXISTS)
        group = get_or_fail(ctx, "nodegroup", p.group)
        node: dict[str, Any] = {
            "name": p.node_name,
            "group": group["uuid"],
            "offline": False,
            "drained": False,
            "vm_capable": True,
            "mtotal": p.mtotal,
            "ctotal": p.ctotal,
        }
        if p.primary_ip is not None:
            ip = str(ipaddress.ip_address(p.primary_ip))
            for other in ctx.list_objects("node"):
                if other.get("primary_ip") == ip:
                    raise OpExecError(
                        f"primary IP {ip} is already used by node {other['name']!r}",
                        ECODE_EXISTS,
                    )
            try:
                ctx.reserve(IP_RESERVATION_NAMESPACE, ip)
            except ReservationError:
                raise OpExecError(
                    f"primary IP {ip} is reserved by another job", ECODE_EXISTS
                ) from None
            node["primary_ip"] = ip
        try:
            added = ctx.add_object("node", node)
        except AlreadyExists as exc:
            raise OpExecError(
                f"cannot add node {p.node_name!r}: {exc.message}", ECODE_EXISTS
            ) from None
        ctx.log(f"Node {p.node_name!r} added to group {group['name']!r} "
                f"({p.mtotal} MiB, {p.ctotal} CPUs)")  # fmt: skip
        return {"name": p.node_name, "uuid": added["uuid"]}


class NodeRemoveParams(OpParams):
    """The node to remove."""

    node_name: Name


class NodeRemove(OpCode[NodeRemoveParams]):
    """Remove a node that no instance uses; result null."""

    OP_ID = "OP_NODE_REMOVE"
    Params = NodeRemoveParams
    SUMMARY_FIELD = "node_name"

    def locks(self, params: NodeRemoveParams, config: ConfigReader) -> LockPlan:
        """node/<name> exclusive (no instance can be placed on it meanwhile)."""
        return LockPlan.single([(lock("node", params.node_name), EXCLUSIVE)])

    def execute(self, ctx: OpContext) -> None:
        """Refuse if instances use the node (as primary or secondary), else remove it."""
        node = get_or_fail(ctx, "node", self.params.node_name)
        users = sorted(
            inst["name"]
            for inst in ctx.list_objects("instance")
            if inst["primary_node"] == node["uuid"]
            or node["uuid"] in (inst.get("secondary_nodes") or ())
        )
        if users:
            raise OpExecError(
                f"node {node['name']!r} still has instances: {', '.join(users)}", ECODE_STATE
            )
        try:
            ctx.remove_object("node", node["uuid"])
        except ConfigValidationError as exc:
            raise OpExecError(f"cannot remove node {node['name']!r}: {exc.message}") from None
        ctx.log(f"Node {node['name']!r} removed")


ROLE_FLAGS = ("offline", "drained", "master_candidate")


class NodeSetParamsParams(OpParams):
    """The node and something to change: role flags (at most one true: one role at a
    time) and/or capacity (mtotal MiB, ctotal CPUs)."""

    node_name: Name
    offline: bool | None = None
    drained: bool | None = None
    master_candidate: bool | None = None
    mtotal: MiB | None = None
    ctotal: Cpus | None = None

    def check(self) -> None:
        """As Ganeti: something to change, and not two roles at once."""
        flags = {flag: getattr(self, flag) for flag in ROLE_FLAGS}
        if all(v is None for v in (*flags.values(), self.mtotal, self.ctotal)):
            raise param_error(
                "offline", "give at least one of offline, drained, master_candidate, "
                "mtotal, ctotal",
            )  # fmt: skip
        true = [k for k, v in flags.items() if v]
        if len(true) > 1:
            raise param_error(true[1], f"cannot set {' and '.join(true)} at the same time")


class NodeSetParams(OpCode[NodeSetParamsParams]):
    """Change a node's role flags or capacity; result ``[[param, new value], …]`` that
    changed.

    The flags are one role as in Ganeti: setting one of them true clears the other two
    (an offline or drained node is no master candidate; a master candidate is online
    and not drained).  Setting a flag false changes only that flag.  The capacity may
    not shrink below what the node's running instances use (OpPrereqError).
    """

    OP_ID = "OP_NODE_SET_PARAMS"
    Params = NodeSetParamsParams
    SUMMARY_FIELD = "node_name"

    def locks(self, params: NodeSetParamsParams, config: ConfigReader) -> LockPlan:
        """node/<name> exclusive."""
        return LockPlan.single([(lock("node", params.node_name), EXCLUSIVE)])

    def execute(self, ctx: OpContext) -> list[list[Any]]:
        """Apply the flags (role semantics above) and write the node if anything changed."""
        node = get_or_fail(ctx, "node", self.params.node_name)
        new: dict[str, Any] = {}
        for flag in ROLE_FLAGS:
            value = getattr(self.params, flag)
            if value:
                new = dict.fromkeys(ROLE_FLAGS, False)
                new[flag] = True
                break
        for flag in ROLE_FLAGS:
            if getattr(self.params, flag) is False:
                new[flag] = False
        for field in ("mtotal", "ctotal"):
            if getattr(self.params, field) is not None:
                new[field] = getattr(self.params, field)
        self._check_capacity(ctx, node, new)
        diff = changed(node, new)
        if diff:
            ctx.update_object("node", {**node, **new})
            for key, value in diff:
                ctx.log(f"Node {node['name']!r}: {key} set to {value}")
        return diff

    @staticmethod
    def _check_capacity(ctx: OpContext, node: ConfigObject, new: dict[str, Any]) -> None:
        """OpPrereqError if the new capacity is below what the running instances use."""
        if "mtotal" not in new and "ctotal" not in new:
            return
        uuid = str(node["uuid"])
        room = ctx.node_rooms([uuid])[uuid]
        mtotal, ctotal = new.get("mtotal", room.mtotal), new.get("ctotal", room.ctotal)
        if mtotal < room.mused or ctotal * room.vcpu_ratio < room.cused:
            raise OpPrereqError(
                f"node {node['name']!r} runs instances using {room.mused} MiB and "
                f"{room.cused} CPUs; {mtotal} MiB and {ctotal} CPUs "
                f"(x{room.vcpu_ratio:g}) are too small: move or stop instances first",
                ECODE_STATE,
            )


class NodeEvacuateParams(OpParams):
    """The node whose primary instances are to be migrated away."""

    node_name: Name


class NodeEvacuate(OpCode[NodeEvacuateParams]):
    """Submit one OP_INSTANCE_MIGRATE job per primary instance of the node; result: their ids.

    Only primary instances move (migrating an instance whose secondary is on the node
    would make the node its primary).  The jobs inherit this opcode's priority and reason
    trail (as Ganeti's _SetBaseOpParams), so a ``rate-limit:<n>:<label>`` reason limits
    them too; the migrations choose their target themselves.
    """

    OP_ID = "OP_NODE_EVACUATE"
    Params = NodeEvacuateParams
    SUMMARY_FIELD = "node_name"

    def locks(self, params: NodeEvacuateParams, config: ConfigReader) -> LockPlan:
        """node/<name> shared: no instance can be created on or moved to it meanwhile."""
        return LockPlan.single([(lock("node", params.node_name), SHARED)])

    def execute(self, ctx: OpContext) -> list[int]:
        """List the node's primary instances and submit the migration jobs."""
        node = get_or_fail(ctx, "node", self.params.node_name)
        names = sorted(
            inst["name"]
            for inst in ctx.list_objects("instance")
            if inst["primary_node"] == node["uuid"]
        )
        if not names:
            ctx.log(f"Node {node['name']!r} has no primary instances")
            return []
        reason = [list(entry) for entry in self.params.reason or ()]
        jobs = [
            [
                {
                    "OP_ID": "OP_INSTANCE_MIGRATE",
                    "instance_name": name,
                    "priority": ctx.priority,
                    "reason": reason,
                    "comment": f"Submitted by {self.OP_ID} (job {ctx.job_id})",
                }
            ]
            for name in names
        ]
        ids = ctx.submit_jobs(jobs)
        for name, job_id in zip(names, ids, strict=False):
            ctx.log(f"Submitted job {job_id} to migrate instance {name!r}")
        return list(ids)
