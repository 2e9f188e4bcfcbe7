"""Helpers for the drain core tests: a reference placement (docs/contracts.md#room-on-nodes, written
here from the contract, since the real one belongs to luxid's placement module) and `World`, a
simulated cluster and job queue that applies the core's effects the way luxid and jobproc would.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import msgspec

from client.budgets import BudgetRecord
from luxid.budgets import BudgetCount, build_book
from luxid.budgets import InstanceFacts as BudgetFacts
from luxid.drains import (
    CancelJob,
    ChangePriority,
    ClusterView,
    DeleteFilter,
    DrainRecord,
    Effect,
    JobFacts,
    NoRoom,
    PutFilter,
    Submit,
    moves,
    node,
)
from luxid.drains.effects import TAG_SOURCE
from luxid.drains.view import InstanceFacts, NodeFacts
from luxid.jobs import Job, new_job

FINAL = ("success", "error", "canceled")
STARTED = ("waiting", "running", "canceling")


def place(view: ClusterView, instance: str, exclude: frozenset[str]) -> str:
    """Among online, non-drained, vm_capable nodes not excluded that have room, the
    one with the most free memory, then the name; NoRoom saying what is short."""
    inst = view.instances[instance]
    mem: dict[str, int] = {}
    cpu: dict[str, int] = {}
    for other in view.instances.values():
        if other.admin_state == "up" and other.name != instance:
            mem[other.primary_node] = mem.get(other.primary_node, 0) + other.memory
            cpu[other.primary_node] = cpu.get(other.primary_node, 0) + other.vcpus
    need_mem = inst.memory if inst.admin_state == "up" else 0
    need_cpu = inst.vcpus if inst.admin_state == "up" else 0
    candidates = [
        n
        for n in view.nodes.values()
        if not (n.offline or n.drained or not n.vm_capable or n.name in exclude)
        and n.name != inst.primary_node
    ]
    fits = [
        (n.mtotal - mem.get(n.name, 0), n.name)
        for n in candidates
        if n.mtotal - mem.get(n.name, 0) >= need_mem
        and cpu.get(n.name, 0) + need_cpu <= n.ctotal * view.vcpu_ratio
    ]
    if fits:
        return min(fits, key=lambda f: (-f[0], f[1]))[1]
    most = max(((n.mtotal - mem.get(n.name, 0), n.name) for n in candidates), default=None)
    tail = f"; most free: {most[1]} with {most[0]} MiB" if most else "; no node is eligible"
    raise NoRoom(
        f"no node has room for {instance}: it needs {inst.memory} MiB and {inst.vcpus} CPUs" + tail
    )


def cluster(nodes: dict[str, int], instances: dict[str, tuple[str, int]]) -> ClusterView:
    """Nodes {name: mtotal}; instances {name: (primary node, memory)}, all up, 1 vcpu."""
    return ClusterView(
        nodes={n: NodeFacts(name=n, mtotal=m) for n, m in nodes.items()},
        instances={
            i: InstanceFacts(name=i, primary_node=p, admin_state="up", memory=m)
            for i, (p, m) in instances.items()
        },
    )


class World:
    """A cluster view, a job table and drain records, driven by the core's effects.

    Jobs go queued -> running -> success/error when the test says so; a successful job
    changes the view as its opcode would.  Every effect applied is kept in `log`.
    """

    def __init__(self, view: ClusterView, now: float = 1000.0) -> None:
        self.view = view
        self.now = now
        self.records: dict[str, DrainRecord] = {}
        self.jobs: dict[int, JobFacts] = {}
        self.ops: dict[int, dict[str, Any]] = {}
        self.next_id = 1
        self.log: list[Effect] = []
        self.filters: dict[str, str] = {}
        self.budgets: list[BudgetRecord] = []  # disruption budgets over `tags`
        self.tags: dict[str, tuple[str, ...]] = {}

    # -- the core, the way the shell calls it ------------------------------------------

    def step(self) -> list[Effect]:
        """One pass over the node drains; effects applied; more passes while effects come
        (what the shell does: applying an effect is an event)."""
        applied: list[Effect] = []
        for _ in range(50):
            self.records, effects = moves.step(
                self.records, self.view, self.jobs, self.now, place, self.gate()
            )
            if not effects:
                return applied
            self.apply(effects)
            applied += effects
        raise AssertionError("the core keeps asking for more: a loop")

    def drain(self, name: str, **strategy: Any) -> list[Effect]:
        strategy = {"deadline": None, "max_parallel": 1, "priority": 0, "message": ""} | strategy
        target = f"node/{name}"
        record, effects = node.drain_node(
            self.records.get(target), name, self.view, self.now, **strategy
        )
        self.records[target] = record
        self.apply(effects)
        return [*effects, *self.step()]

    def cancel(self, name: str, keep_drained: bool = False) -> list[Effect]:
        target = f"node/{name}"
        self.records[target] = node.cancel_node_drain(
            self.records[target], self.now, keep_drained=keep_drained
        )
        return self.step()

    def crash_step(self, carried_out: int) -> None:
        """luxid dies in a pass: the first `carried_out` effects were applied, the new
        records were not written.  It restarts and finds its jobs again by their tags."""
        _, effects = moves.step(self.records, self.view, self.jobs, self.now, place)
        self.apply(effects[:carried_out], record=False)
        for target, record in self.records.items():
            tags = {
                job_id: entry[1]
                for job_id, op in self.ops.items()
                for entry in op.get("reason", [])
                if entry[0] == TAG_SOURCE and entry[1].startswith(target + " ")
            }
            self.records[target] = node.adopt_jobs(record, tags, self.now)

    def apply(self, effects: Iterable[Effect], *, record: bool = True) -> None:
        """Carry out effects; `record`: report submitted jobs to their drain."""
        for effect in effects:
            self.log.append(effect)
            if isinstance(effect, Submit):
                job_id = self.next_id
                self.next_id += 1
                self.jobs[job_id] = JobFacts(status="queued")
                self.ops[job_id] = effect.ops[0]
                if record:
                    self.records[effect.target] = node.record_submitted(
                        self.records[effect.target], effect, job_id, self.now
                    )
            elif isinstance(effect, CancelJob):
                status = self.jobs[effect.job_id].status
                if status in ("queued", "waiting"):
                    self.jobs[effect.job_id] = JobFacts(status="canceled", error="canceled")
                elif status == "running" and effect.kill:
                    self.jobs[effect.job_id] = JobFacts(status="error", error="killed")
            elif isinstance(effect, ChangePriority):
                self.ops[effect.job_id]["priority"] = effect.priority
            elif isinstance(effect, PutFilter):
                self.filters[effect.uuid] = effect.action
            elif isinstance(effect, DeleteFilter):
                del self.filters[effect.uuid]

    # -- disruption budgets -----------------------------------------------------------------

    def book(self) -> Any:
        facts = [
            BudgetFacts(name, self.tags.get(name, ()), inst.admin_state == "up")
            for name, inst in self.view.instances.items()
        ]
        return build_book(self.budgets, facts)

    def job(self, job_id: int) -> Job:
        return new_job(job_id, [self.ops[job_id]], now=float(job_id))

    def started(self) -> list[Job]:
        return [self.job(i) for i, f in sorted(self.jobs.items()) if f.status in STARTED]

    def gate(self) -> BudgetCount | None:
        """The rule as luxid's drains ask it: started jobs and every drain's queued moves
        counted (luxid.drain_budgets)."""
        if not self.budgets:
            return None
        queued = [
            self.job(job.id)
            for record in self.records.values()
            for job in record.active
            if job.kind in node.MOVES and self.jobs[job.id].status == "queued"
        ]
        return BudgetCount(self.book(), [*self.started(), *queued])

    def schedule(self) -> list[int]:
        """The scheduler: start every queued job, in id order, that no budget holds."""
        count = BudgetCount(self.book(), self.started())
        begun = []
        for job_id in self.unfinished():
            if self.jobs[job_id].status == "queued" and count.hold(self.job(job_id)) is None:
                count.start(self.job(job_id))
                self.run(job_id)
                begun.append(job_id)
        return begun

    def submit_manual(self, instance: str, op_id: str, **params: Any) -> int:
        """A job an operator submitted (no drain's reason)."""
        job_id = self.next_id
        self.next_id += 1
        self.jobs[job_id] = JobFacts(status="queued")
        self.ops[job_id] = {"OP_ID": op_id, "instance_name": instance, "reason": [], **params}
        return job_id

    # -- jobs ------------------------------------------------------------------------------

    def unfinished(self, kind: str | None = None) -> list[int]:
        return [
            i
            for i, facts in sorted(self.jobs.items())
            if facts.status not in FINAL and (kind is None or self.ops[i]["OP_ID"] == kind)
        ]

    def run(self, job_id: int) -> None:
        self.jobs[job_id] = JobFacts(status="running")

    def finish(self, job_id: int, error: str | None = None) -> None:
        """End a job: success applies its opcode to the view; with `error` it fails."""
        if error is not None:
            self.jobs[job_id] = JobFacts(status="error", error=error)
            return
        op = self.ops[job_id]
        op_id = op["OP_ID"]
        if op_id == "OP_NODE_SET_PARAMS":
            self.set_node(op["node_name"], drained=op["drained"])
        elif op_id in ("OP_INSTANCE_MIGRATE", "OP_INSTANCE_FAILOVER"):
            self.set_instance(op["instance_name"], primary_node=op["target_node"])
        elif op_id == "OP_INSTANCE_SHUTDOWN":
            self.set_instance(op["instance_name"], admin_state="down")
        self.jobs[job_id] = JobFacts(status="success")

    def finish_all(self, kind: str | None = None) -> None:
        for job_id in self.unfinished(kind):
            self.finish(job_id)

    # -- the configuration -----------------------------------------------------------------

    def set_node(self, name: str, **changes: Any) -> None:
        nodes = dict(self.view.nodes)
        nodes[name] = msgspec.structs.replace(nodes.get(name, NodeFacts(name=name)), **changes)
        self.view = msgspec.structs.replace(self.view, nodes=nodes)

    def set_instance(self, name: str, **changes: Any) -> None:
        instances = dict(self.view.instances)
        instances[name] = msgspec.structs.replace(instances[name], **changes)
        self.view = msgspec.structs.replace(self.view, instances=instances)

    def remove_instance(self, name: str) -> None:
        instances = dict(self.view.instances)
        del instances[name]
        self.view = msgspec.structs.replace(self.view, instances=instances)

    def events(self, name: str) -> list[str]:
        return [text for _, _, text in self.records[f"node/{name}"].events]
