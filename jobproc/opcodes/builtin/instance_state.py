"""Starting and stopping instances: OP_INSTANCE_STARTUP and OP_INSTANCE_SHUTDOWN (SPEC §7.1,
§12.4).  An instance that is up uses room on its primary node, so startup checks room the
way placement does; shutdown frees it.

Locks: instance/<name> exclusive, then (read under that lock) its primary node shared.
Startup also takes node-res/<primary> exclusively (beyond the table of §12.4): two
startups on one node hold the node only shared, and without a common exclusive lock both
could see the same free memory and over-fill the node.  OP_INSTANCE_CREATE takes the same
node-res lock, so creations and startups on one node are serialised too.
"""

from __future__ import annotations

from jobproc.opcodes.base import Name, OpCode, OpParams
from jobproc.opcodes.builtin._common import check_room, get_or_fail, node_name
from jobproc.opcodes.context import ConfigReader, OpContext
from jobproc.opcodes.errors import ECODE_STATE, OpPrereqError
from jobproc.opcodes.locks import EXCLUSIVE, SHARED, LockMode, LockPhase, LockPlan, lock


class InstanceStateParams(OpParams):
    """The instance to start or stop."""

    instance_name: Name


def _primary_phase(config: ConfigReader, instance: str, *, res: bool) -> LockPhase:
    """node/<primary> shared (and node-res/<primary> exclusive if `res`)."""
    inst = get_or_fail(config, "instance", instance)
    primary = node_name(config, str(inst["primary_node"]))
    locks: list[tuple[str, LockMode]] = [(lock("node", primary), SHARED)]
    if res:
        locks.append((lock("node-res", primary), EXCLUSIVE))
    return LockPhase.of(locks)


class InstanceStartup(OpCode[InstanceStateParams]):
    """Bring a `down` instance up on its primary node if it has room; result null.

    Starting a running instance does nothing (as Ganeti); an `offline` instance, or one
    whose primary node is offline, cannot start (OpPrereqError).
    """

    OP_ID = "OP_INSTANCE_STARTUP"
    Params = InstanceStateParams
    SUMMARY_FIELD = "instance_name"

    def locks(self, params: InstanceStateParams, config: ConfigReader) -> LockPlan:
        """instance/<name> ex, then node/<primary> shared and node-res/<primary> ex."""
        name = params.instance_name
        return LockPlan(phases=(
            LockPhase.of([(lock("instance", name), EXCLUSIVE)]),
            lambda cfg: _primary_phase(cfg, name, res=True),
        ))  # fmt: skip

    def execute(self, ctx: OpContext) -> None:
        """Check state, node and room; set admin_state up."""
        inst = get_or_fail(ctx, "instance", self.params.instance_name)
        name = str(inst["name"])
        if inst.get("admin_state") == "up":
            ctx.log(f"Instance {name!r} is already running")
            return
        if inst.get("admin_state") == "offline":
            raise OpPrereqError(f"instance {name!r} is offline; cannot start it", ECODE_STATE)
        node = get_or_fail(ctx, "node", str(inst["primary_node"]))
        if node.get("offline"):
            raise OpPrereqError(
                f"node {node['name']!r} is offline; cannot start instance {name!r} on it",
                ECODE_STATE,
            )
        check_room(ctx, node, name, int(inst["memory"]), int(inst["vcpus"]))
        ctx.update_object("instance", {**inst, "admin_state": "up"})
        ctx.log(f"Instance {name!r} started on node {node['name']!r}")


class InstanceShutdown(OpCode[InstanceStateParams]):
    """Stop an instance (admin_state down), freeing its room; result null.

    Stopping a stopped instance does nothing; an `offline` one cannot be stopped.
    """

    OP_ID = "OP_INSTANCE_SHUTDOWN"
    Params = InstanceStateParams
    SUMMARY_FIELD = "instance_name"

    def locks(self, params: InstanceStateParams, config: ConfigReader) -> LockPlan:
        """instance/<name> ex, then its primary node shared (SPEC §12.4)."""
        name = params.instance_name
        return LockPlan(phases=(
            LockPhase.of([(lock("instance", name), EXCLUSIVE)]),
            lambda cfg: _primary_phase(cfg, name, res=False),
        ))  # fmt: skip

    def execute(self, ctx: OpContext) -> None:
        """Set admin_state down."""
        inst = get_or_fail(ctx, "instance", self.params.instance_name)
        name = str(inst["name"])
        if inst.get("admin_state") == "down":
            ctx.log(f"Instance {name!r} is already stopped")
            return
        if inst.get("admin_state") == "offline":
            raise OpPrereqError(f"instance {name!r} is offline; cannot stop it", ECODE_STATE)
        ctx.update_object("instance", {**inst, "admin_state": "down"})
        ctx.log(f"Instance {name!r} stopped")
