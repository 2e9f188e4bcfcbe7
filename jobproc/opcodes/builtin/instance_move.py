"""Moving an instance's primary role: OP_INSTANCE_MIGRATE (live) and OP_INSTANCE_FAILOVER
(stop, move, start) — one code path, different words in the log (simulated data plane).

Both lock in two phases, as Ganeti's DeclareLocks: instance/<name> exclusively, then —
reading the configuration that lock protects — node/<source> and node/<target> shared and
node-res/<target> exclusively.  The target is `target_node`, else the first secondary
node, else placement's choice (docs/contracts.md#room-on-nodes: the eligible node other than
the source with room and the most free memory).

Why these modes (the table of docs/contracts.md#job-processes-and-opcodes), not both nodes
exclusive: a move writes only the instance, which its own lock guards.  The source is not
modified — an instance leaving it only frees room — so it is held shared: a drain's moves
off one node run side by side instead of one at a time, while a job that changes or removes
the node (node/<n> exclusive) still waits for them.  The target's room is the one thing
moves could race on: the check and the write are made under node-res/<target> exclusively,
the lock every job that takes room on a node holds (OP_INSTANCE_CREATE, OP_INSTANCE_STARTUP,
these moves), so concurrent moves onto one node never over-fill it — a move that finds
the node full fails with OpPrereqError and changes nothing.  node/<target> shared keeps
the target's flags (offline, drained) and size from changing under the check.
`duration` is the simulated data plane's time, spent before the configuration changes
and interruptible: a cancel leaves the instance where it was.
"""

from __future__ import annotations

from typing import Annotated, Any, ClassVar

from msgspec import Meta

from jobproc.locks import EXCLUSIVE, SHARED, LockPhase, LockPlan, lock
from jobproc.opcodes.base import Name, OpCode, OpParams
from jobproc.opcodes.builtin._common import (
    check_eligible,
    check_room,
    get_or_fail,
    instance_plan,
    node_lock_name,
    node_name,
    place,
    uses_room,
)
from jobproc.opcodes.context import ConfigReader, OpContext
from jobproc.opcodes.errors import ECODE_INVAL, OpExecError


class InstanceMoveParams(OpParams):
    """The instance, optionally the node to move it to (by name), and the simulated time."""

    instance_name: Name
    target_node: Name | None = None
    duration: Annotated[float, Meta(ge=0)] = 0.0


class _InstanceMove(OpCode[InstanceMoveParams]):
    """Move an instance's primary role to another node; result
    ``{"instance", "source", "target"}`` (node names).

    Moving to a secondary swaps the two roles (as DRBD); to another node, the
    secondaries stay.  The target must be online, not drained and vm_capable; the
    source may be anything (evacuating an offline node is the point).
    """

    Params = InstanceMoveParams
    SUMMARY_FIELD = "instance_name"
    INTERRUPTIBLE = True
    VERB: ClassVar[str] = "move"  # how errors name the move: "cannot <VERB> instance …"
    STEPS: ClassVar[tuple[str, ...]] = ()  # logged before the simulated wait

    def __init__(self, params: InstanceMoveParams) -> None:
        super().__init__(params)
        self.instance: dict[str, Any] = {}  # as read under its lock (which keeps it so)
        self.source: str | None = None  # its primary node's uuid
        self.source_name = ""  # its name (the lock's; node/<source> keeps it from changing)
        self.target: str | None = None  # node name (the lock's name)

    def locks(self, params: InstanceMoveParams, config: ConfigReader) -> LockPlan:
        """instance/<name> ex, then (phase 1) node/<source> and node/<target> shared and
        node-res/<target> ex."""
        return instance_plan(params.instance_name, self._nodes)

    def _nodes(self, config: ConfigReader) -> LockPhase:
        """Phase 1: find source and target under the instance lock."""
        inst = self.instance = get_or_fail(config, "instance", self.params.instance_name)
        self.source = str(inst["primary_node"])
        self.source_name = node_name(config, self.source)
        secondaries = [s for s in inst.get("secondary_nodes") or () if s != self.source]
        if self.params.target_node is not None:
            self.target = node_lock_name(config, self.params.target_node)
        elif secondaries:
            self.target = node_name(config, secondaries[0])
        else:
            memory, vcpus = uses_room(inst)
            self.target = place(config, str(inst["name"]), memory, vcpus, [self.source]).name
        return LockPhase.of([(lock("node", self.source_name), SHARED),
                             (lock("node", self.target), SHARED),
                             (lock("node-res", self.target), EXCLUSIVE)])  # fmt: skip

    def execute(self, ctx: OpContext) -> dict[str, Any]:
        """Check the target (eligible, room), wait `duration`, rewrite the node roles.

        The instance is the one read in the lock phase: instance/<name>, held since
        before that read, keeps it from changing.  The target is read again, now that
        its locks are held."""
        if self.source is None or self.target is None:
            raise RuntimeError("locks() must have resolved the nodes before execute()")
        inst = self.instance
        name = str(inst["name"])
        target = get_or_fail(ctx, "node", self.target)
        source_name = self.source_name
        if target["uuid"] == self.source:
            raise OpExecError(
                f"instance {name!r} is already on node {target['name']!r}", ECODE_INVAL
            )
        check_eligible(target, f"{self.VERB} instance {name!r} to it")
        check_room(ctx, target, name, *uses_room(inst))
        for step in self.STEPS:
            ctx.log(step.format(name=name, source=source_name, target=target["name"]))
        ctx.sleep(self.params.duration)
        secondaries = [
            self.source if s == target["uuid"] else s for s in inst.get("secondary_nodes") or ()
        ]
        ctx.update_object(
            "instance", {**inst, "primary_node": target["uuid"], "secondary_nodes": secondaries}
        )
        return {"instance": name, "source": source_name, "target": target["name"]}


class InstanceMigrate(_InstanceMove):
    """Live-migrate an instance: it keeps running while it moves."""

    OP_ID = "OP_INSTANCE_MIGRATE"
    VERB = "migrate"
    STEPS = ("Migrating instance {name!r} from {source!r} to {target!r}",)


class InstanceFailover(_InstanceMove):
    """Fail an instance over: stopped on the source, started on the target —
    faster than a migration, with downtime."""

    OP_ID = "OP_INSTANCE_FAILOVER"
    VERB = "fail over"
    STEPS = (
        "Shutting down instance {name!r} on node {source!r}",
        "Starting instance {name!r} on node {target!r}",
    )
