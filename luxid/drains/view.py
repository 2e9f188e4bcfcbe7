"""The cluster as a drain sees it: nodes, instances and their room (SPEC §7.1), as plain data.

The drain core never reads wconfd itself: the shell hands it a `ClusterView` built from the
configuration document (`view_from_config`).  Nodes and instances are keyed by *name*, and
an instance's `primary_node` is a node name, because drain records, events and reason
trails speak names.

`capacity_key` condenses the facts that decide whether a blocked move could succeed now —
which nodes may take instances and how much room each has left — so the core retries a
blocked instance only when that key changed (SPEC §12.1: "a node added, undrained or
brought online, an instance stopped or removed"), never in a loop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

import msgspec

from client.capacity import choose, no_room_message, rooms

DEFAULT_MTOTAL: Final = 65536
DEFAULT_CTOTAL: Final = 32
DEFAULT_VCPU_RATIO: Final = 4.0


class NodeFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What placement needs to know about a node."""

    name: str
    offline: bool = False
    drained: bool = False
    vm_capable: bool = True
    mtotal: int = DEFAULT_MTOTAL
    ctotal: int = DEFAULT_CTOTAL


class InstanceFacts(msgspec.Struct, frozen=True, kw_only=True):
    """What a drain needs to know about an instance (`primary_node` is a node name)."""

    name: str
    primary_node: str
    admin_state: str = "down"
    memory: int = 128
    vcpus: int = 1


class ClusterView(msgspec.Struct, frozen=True, kw_only=True):
    """Nodes and instances by name, and the cluster's vcpu ratio (§7.1)."""

    nodes: Mapping[str, NodeFacts]
    instances: Mapping[str, InstanceFacts]
    vcpu_ratio: float = DEFAULT_VCPU_RATIO

    def on_node(self, node: str) -> list[str]:
        """The names of the instances whose primary node is `node`, sorted."""
        return sorted(i.name for i in self.instances.values() if i.primary_node == node)

    def with_moves(self, moves: Iterable[tuple[str, str]]) -> ClusterView:
        """The view as it will be once each `(instance, target node)` move is done.

        Planning counts the moves already under way as done, so that two moves planned in
        one pass (or one pass and the next) do not both take the same room.
        """
        changed = {
            name: msgspec.structs.replace(self.instances[name], primary_node=target)
            for name, target in moves
            if name in self.instances
        }
        if not changed:
            return self
        return ClusterView(
            nodes=self.nodes, instances={**self.instances, **changed}, vcpu_ratio=self.vcpu_ratio
        )


def _num(value: Any, default: float) -> Any:
    return default if value is None else value


def view_from_config(doc: Mapping[str, Any]) -> ClusterView:
    """The view of a configuration document of SPEC §5 (as `get_config` returns it).

    Capacity fields (`mtotal`, `ctotal`, the cluster's `vcpu_ratio`) take their §7.1
    defaults when the document does not carry them.
    """
    node_names: dict[str, str] = {}
    nodes: dict[str, NodeFacts] = {}
    for uuid, node in (doc.get("nodes") or {}).items():
        name = node["name"]
        node_names[uuid] = name
        nodes[name] = NodeFacts(
            name=name,
            offline=bool(node.get("offline", False)),
            drained=bool(node.get("drained", False)),
            vm_capable=bool(node.get("vm_capable", True)),
            mtotal=int(_num(node.get("mtotal"), DEFAULT_MTOTAL)),
            ctotal=int(_num(node.get("ctotal"), DEFAULT_CTOTAL)),
        )
    instances: dict[str, InstanceFacts] = {}
    for inst in (doc.get("instances") or {}).values():
        primary = inst.get("primary_node", "")
        instances[inst["name"]] = InstanceFacts(
            name=inst["name"],
            primary_node=node_names.get(primary, primary),
            admin_state=inst.get("admin_state", "down"),
            memory=int(_num(inst.get("memory"), 128)),
            vcpus=int(_num(inst.get("vcpus"), 1)),
        )
    cluster = doc.get("cluster") or {}
    ratio = float(_num(cluster.get("vcpu_ratio"), DEFAULT_VCPU_RATIO))
    return ClusterView(nodes=nodes, instances=instances, vcpu_ratio=ratio)


def capacity_key(view: ClusterView) -> str:
    """A fingerprint of where instances could go: each node's eligibility and room left.

    Two views with the same key offer exactly the same room on the same nodes, so a move
    that was refused for lack of room would be refused again; any change that could let
    it succeed (a node added, undrained or brought online, more memory, an instance
    stopped, removed or moved away) changes the key.
    """
    used_mem: dict[str, int] = {}
    used_cpu: dict[str, int] = {}
    for inst in view.instances.values():
        if inst.admin_state == "up":
            used_mem[inst.primary_node] = used_mem.get(inst.primary_node, 0) + inst.memory
            used_cpu[inst.primary_node] = used_cpu.get(inst.primary_node, 0) + inst.vcpus
    facts = sorted(
        (
            n.name,
            n.offline,
            n.drained,
            n.vm_capable,
            n.mtotal - used_mem.get(n.name, 0),
            n.ctotal,
            used_cpu.get(n.name, 0),
        )
        for n in view.nodes.values()
    )
    # A digest, not hash(): the key is stored in drain records and must survive a restart.
    encoded = msgspec.json.encode([view.vcpu_ratio, facts])
    return hashlib.blake2b(encoded, digest_size=12).hexdigest()


class NoRoom(Exception):
    """Placement found no node for an instance; the message says what is short (§7.1)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# (view, instance name, nodes it must not go to) -> the chosen node's name; raises NoRoom.
# The real one is §7.1's placement; the drain core only calls it.
Placement = Callable[[ClusterView, str, frozenset[str]], str]


def place(view: ClusterView, instance: str, exclude: frozenset[str]) -> str:
    """The §7.1 placement (client.capacity, the rule the opcodes use) on a view: the
    eligible node, not `exclude` nor the instance's own, with room and the most free
    memory; NoRoom with the placement's message (`no node has room for web3: …`)."""
    inst = view.instances[instance]
    nodes = [
        {"uuid": n.name, "name": n.name, "offline": n.offline, "drained": n.drained,
         "vm_capable": n.vm_capable, "mtotal": n.mtotal, "ctotal": n.ctotal}
        for n in view.nodes.values()
    ]  # fmt: skip
    others = [
        {"primary_node": i.primary_node, "admin_state": i.admin_state,
         "memory": i.memory, "vcpus": i.vcpus}
        for i in view.instances.values()
        if i.name != instance
    ]  # fmt: skip
    candidates = rooms(nodes, others, view.vcpu_ratio).values()
    running = inst.admin_state == "up"
    memory, vcpus = (inst.memory, inst.vcpus) if running else (0, 0)
    skip = exclude | {inst.primary_node}
    room = choose(candidates, memory, vcpus, skip)
    if room is None:
        raise NoRoom(no_room_message(instance, inst.memory, inst.vcpus, candidates, skip))
    return room.name
