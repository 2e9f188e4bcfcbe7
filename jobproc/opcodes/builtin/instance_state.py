"""Starting and stopping instances: OP_INSTANCE_STARTUP and OP_INSTANCE_SHUTDOWN.  An
instance that is up uses room on its primary node (docs/contracts.md#room-on-nodes), so
startup checks room the way placement does; shutdown frees it.

Locks: instance/<name> exclusive, then (read under that lock) its primary node shared.
Startup also takes node-res/<primary> exclusively (beyond the table of
docs/contracts.md#job-processes-and-opcodes): two startups on one node hold the node only
shared, and without a common exclusive lock both could see the same free memory and
over-fill the node.  OP_INSTANCE_CREATE takes the same node-res lock, so creations and
startups on one node are serialised too.
"""

from __future__ import annotations

from typing import ClassVar, Literal

from jobproc.locks import EXCLUSIVE, SHARED, LockMode, LockPhase, LockPlan, lock
from jobproc.opcodes.base import Name, OpCode, OpParams
from jobproc.opcodes.builtin._common import check_room, get_or_fail, instance_plan, node_name
from jobproc.opcodes.context import ConfigObject, ConfigReader, OpContext
from jobproc.opcodes.errors import ECODE_STATE, OpPrereqError


class InstanceStateParams(OpParams):
    """The instance to start or stop."""

    instance_name: Name


class _InstanceStateChange(OpCode[InstanceStateParams]):
    """Set an instance's admin_state to `STATE`; result null.

    Nothing happens if it is in that state already (as Ganeti); an `offline` instance
    can be neither started nor stopped (OpPrereqError).
    """

    Params = InstanceStateParams
    SUMMARY_FIELD = "instance_name"
    STATE: ClassVar[Literal["up", "down"]]
    VERB: ClassVar[str]  # "start", "stop"
    DONE: ClassVar[str]  # the state in words: "running", "stopped"
    PAST: ClassVar[str]  # the change in words: "started", "stopped"
    NODE_RES: ClassVar[bool]  # take node-res/<primary> exclusively

    def locks(self, params: InstanceStateParams, config: ConfigReader) -> LockPlan:
        """instance/<name> ex, then node/<primary> shared (and node-res/<primary> ex)."""
        return instance_plan(params.instance_name, self._primary)

    def _primary(self, config: ConfigReader) -> LockPhase:
        inst = get_or_fail(config, "instance", self.params.instance_name)
        primary = node_name(config, str(inst["primary_node"]))
        locks: list[tuple[str, LockMode]] = [(lock("node", primary), SHARED)]
        if self.NODE_RES:
            locks.append((lock("node-res", primary), EXCLUSIVE))
        return LockPhase.of(locks)

    def execute(self, ctx: OpContext) -> None:
        """Check the state (and what `check` asks), then write the new admin_state."""
        inst = get_or_fail(ctx, "instance", self.params.instance_name)
        name = str(inst["name"])
        if inst.get("admin_state") == self.STATE:
            ctx.log(f"Instance {name!r} is already {self.DONE}")
            return
        if inst.get("admin_state") == "offline":
            raise OpPrereqError(f"instance {name!r} is offline; cannot {self.VERB} it", ECODE_STATE)
        self.check(ctx, inst)
        ctx.update_object("instance", {**inst, "admin_state": self.STATE})
        ctx.log(f"Instance {name!r} {self.PAST} on node "
                f"{node_name(ctx, str(inst['primary_node']))!r}")  # fmt: skip

    def check(self, ctx: OpContext, inst: ConfigObject) -> None:
        """What else must hold before the change (nothing by default)."""


class InstanceStartup(_InstanceStateChange):
    """Bring a `down` instance up on its primary node if the node is online and has room."""

    OP_ID = "OP_INSTANCE_STARTUP"
    STATE = "up"
    VERB = "start"
    DONE = "running"
    PAST = "started"
    NODE_RES = True

    def check(self, ctx: OpContext, inst: ConfigObject) -> None:
        """The primary node is online and has room for the instance
        (docs/contracts.md#room-on-nodes)."""
        node = get_or_fail(ctx, "node", str(inst["primary_node"]))
        if node.get("offline"):
            raise OpPrereqError(
                f"node {node['name']!r} is offline; cannot start instance {inst['name']!r} on it",
                ECODE_STATE,
            )
        check_room(ctx, node, str(inst["name"]), int(inst["memory"]), int(inst["vcpus"]))


class InstanceShutdown(_InstanceStateChange):
    """Stop an instance (admin_state down), freeing its room."""

    OP_ID = "OP_INSTANCE_SHUTDOWN"
    STATE = "down"
    VERB = "stop"
    DONE = "stopped"
    PAST = "stopped"
    NODE_RES = False
