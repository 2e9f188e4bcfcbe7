"""Cluster-wide opcodes: rename, set parameters (BGL exclusive) and verify (all shared)."""

from __future__ import annotations

from collections import Counter
from typing import Annotated, Any, Literal

from msgspec import Meta

from client.capacity import vcpu_ratio
from jobproc.locks import EXCLUSIVE, LEVELS, SHARED, LockPlan, lockset
from jobproc.opcodes.base import MacPrefix, OpCode, OpParams, Tag, param_error
from jobproc.opcodes.builtin._common import changed
from jobproc.opcodes.context import ConfigReader, OpContext
from jobproc.opcodes.errors import ECODE_INVAL, ECODE_STATE, OpExecError, OpPrereqError


class ClusterRenameParams(OpParams):
    """The new cluster name."""

    name: Annotated[str, Meta(min_length=1, max_length=255)]

    def check(self) -> None:
        """No surrounding or inner whitespace: the name is shown and compared verbatim."""
        if self.name != self.name.strip() or any(c.isspace() for c in self.name):
            raise param_error("name", "the cluster name must not contain whitespace")


class ClusterRename(OpCode[ClusterRenameParams]):
    """Rename the cluster; result: the new name."""

    OP_ID = "OP_CLUSTER_RENAME"
    Params = ClusterRenameParams
    SUMMARY_FIELD = "name"

    def locks(self, params: ClusterRenameParams, config: ConfigReader) -> LockPlan:
        """cluster/BGL exclusive: the cluster object is written."""
        return LockPlan.single(bgl=EXCLUSIVE)

    def execute(self, ctx: OpContext) -> str:
        """Write the new name; refuse a rename to the current name (as Ganeti)."""
        cluster = ctx.get_object("cluster", "")
        if cluster["name"] == self.params.name:
            raise OpExecError(f"the cluster is already named {self.params.name!r}", ECODE_INVAL)
        ctx.update_object("cluster", {**cluster, "name": self.params.name})
        ctx.log(f"Cluster renamed from {cluster['name']!r} to {self.params.name!r}")
        return self.params.name


class ClusterSetParamsParams(OpParams):
    """Each given (non-null) field replaces the cluster's; tags replace the whole list;
    vcpu_ratio is the instance policy's `vcpu-ratio` (virtual CPUs per physical CPU)."""

    max_running_jobs: Annotated[int, Meta(ge=1)] | None = None
    mac_prefix: MacPrefix | None = None
    lock_enforcement: Literal["enforce", "warn"] | None = None
    tags: list[Tag] | None = None
    vcpu_ratio: Annotated[float, Meta(gt=0, le=1024)] | None = None


class ClusterSetParams(OpCode[ClusterSetParamsParams]):
    """Change cluster parameters; result: ``[[param, new value], …]`` that changed."""

    OP_ID = "OP_CLUSTER_SET_PARAMS"
    Params = ClusterSetParamsParams

    def locks(self, params: ClusterSetParamsParams, config: ConfigReader) -> LockPlan:
        """cluster/BGL exclusive: the cluster object is written."""
        return LockPlan.single(bgl=EXCLUSIVE)

    def execute(self, ctx: OpContext) -> list[list[Any]]:
        """Update the given fields (MAC prefix lower-cased, tags deduplicated in order)."""
        p = self.params
        new: dict[str, Any] = {}
        if p.max_running_jobs is not None:
            new["max_running_jobs"] = p.max_running_jobs
        if p.mac_prefix is not None:
            new["mac_prefix"] = p.mac_prefix.lower()
        if p.lock_enforcement is not None:
            new["lock_enforcement"] = p.lock_enforcement
        if p.tags is not None:
            new["tags"] = list(dict.fromkeys(p.tags))
        cluster = ctx.get_object("cluster", "")
        diff = changed(cluster, new)
        if p.vcpu_ratio is not None and p.vcpu_ratio != vcpu_ratio(cluster):
            _check_cpu_limits(ctx, p.vcpu_ratio)
            new["ipolicy"] = {**(cluster.get("ipolicy") or {}), "vcpu-ratio": p.vcpu_ratio}
            diff.append(["vcpu_ratio", p.vcpu_ratio])
        if diff:
            ctx.update_object("cluster", {**cluster, **new})
            for key, value in diff:
                ctx.log(f"Cluster parameter {key} set to {value!r}")
        return diff


def _check_cpu_limits(ctx: OpContext, ratio: float) -> None:
    """OpPrereqError if some node's running instances would exceed ctotal x `ratio`."""
    for room in sorted(ctx.node_rooms().values(), key=lambda r: r.name):
        if room.cused > room.ctotal * ratio:
            raise OpPrereqError(
                f"vcpu_ratio {ratio:g} is too small: node {room.name!r} runs {room.cused} "
                f"virtual CPUs on {room.ctotal} CPUs; move or stop instances first",
                ECODE_STATE,
            )


class ClusterVerifyParams(OpParams):
    """No parameters."""


class ClusterVerify(OpCode[ClusterVerifyParams]):
    """Check the configuration's consistency; result ``{"ok": bool, "problems": [str]}``.

    Each problem is also logged.  It checks what the simulated data plane can know:
    dangling node/group references, instances on offline nodes, secondaries equal to the
    primary, duplicate MACs, duplicate names and nodes whose running instances exceed
    their capacity (docs/contracts.md#room-on-nodes).
    """

    OP_ID = "OP_CLUSTER_VERIFY"
    Params = ClusterVerifyParams

    def locks(self, params: ClusterVerifyParams, config: ConfigReader) -> LockPlan:
        """cluster/BGL shared and every level's lockset shared: a stable snapshot."""
        return LockPlan.single(((lockset(lv), SHARED) for lv in LEVELS[1:]), bgl=SHARED)

    def execute(self, ctx: OpContext) -> dict[str, Any]:
        """Collect the problems, log them, return them."""
        problems: list[str] = []
        groups = {g["uuid"]: g for g in ctx.list_objects("nodegroup")}
        nodes = {n["uuid"]: n for n in ctx.list_objects("node")}
        instances = ctx.list_objects("instance")
        for kind, objs in (
            ("node group", groups.values()),
            ("node", nodes.values()),
            ("instance", instances),
        ):
            for name, n in Counter(o["name"] for o in objs).items():
                if n > 1:
                    problems.append(f"{kind} name {name!r} is used {n} times")
        for node in sorted(nodes.values(), key=lambda n: n["name"]):
            if node.get("group") not in groups:
                problems.append(f"node {node['name']!r}: unknown node group {node.get('group')!r}")
        macs: Counter[str] = Counter()
        for inst in sorted(instances, key=lambda i: i["name"]):
            name = inst["name"]
            primary = nodes.get(inst["primary_node"])
            if primary is None:
                problems.append(f"instance {name!r}: unknown primary node {inst['primary_node']!r}")
            elif primary.get("offline") and inst.get("admin_state", "up") == "up":
                problems.append(f"instance {name!r}: primary node {primary['name']!r} is offline")
            for sec in inst.get("secondary_nodes") or ():
                if sec == inst["primary_node"]:
                    problems.append(f"instance {name!r}: secondary node is the primary node")
                elif sec not in nodes:
                    problems.append(f"instance {name!r}: unknown secondary node {sec!r}")
            macs.update(str(nic["mac"]).lower() for nic in inst.get("nics") or () if nic.get("mac"))
        for mac, n in sorted(macs.items()):
            if n > 1:
                problems.append(f"MAC {mac} is used by {n} NICs")
        for room in sorted(ctx.node_rooms().values(), key=lambda r: r.name):
            if room.mfree < 0 or room.cfree < 0:
                problems.append(
                    f"node {room.name!r} is over capacity: its running instances use "
                    f"{room.mused} of {room.mtotal} MiB and {room.cused} of "
                    f"{room.climit:g} virtual CPUs"
                )
        for problem in problems:
            ctx.log(f"ERROR: {problem}")
        ctx.log(f"Cluster verify: {len(problems)} problem(s)")
        return {"ok": not problems, "problems": problems}
