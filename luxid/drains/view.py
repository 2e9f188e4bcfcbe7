"""The cluster as a drain sees it: nodes, instances and their room
(docs/contracts.md#room-on-nodes), as plain data.

The drain core never reads wconfd itself: the shell hands it a `ClusterView` built from the
configuration document (`view_from_config`).  Nodes and instances are keyed by *name*, and
an instance's `primary_node` is a node name, because drain records, events and reason
trails speak names.

`capacity_key` condenses the facts that decide whether a blocked move could succeed now —
which nodes may take instances and how much room each has left — so the core retries a
blocked instance only when that key changed (docs/contracts.md#node-drain: "a node added,
undrained or online again, an instance stopped or removed"), never in a loop.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Generic, TypeVar

import msgspec

from client.capacity import (
    DEFAULT_CTOTAL,
    DEFAULT_MTOTAL,
    DEFAULT_VCPU_RATIO,
    Room,
    choose,
    eligible,
    no_room_message,
    vcpu_ratio,
)


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
    """Nodes and instances by name, and the cluster's vcpu ratio."""

    nodes: Mapping[str, NodeFacts]
    instances: Mapping[str, InstanceFacts]
    vcpu_ratio: float = DEFAULT_VCPU_RATIO

    def on_node(self, node: str) -> list[str]:
        """The names of the instances whose primary node is `node`, sorted."""
        return sorted(_BY_NODE.get(self.instances).get(node, ()))

    def used(self, node: str) -> tuple[int, int]:
        """(MiB, virtual CPUs) the running primary instances of `node` use."""
        return _USED.get(self.instances).get(node, (0, 0))

    def with_moves(self, moves: Iterable[tuple[str, str]]) -> ClusterView:
        """The view as it will be once each `(instance, target node)` move is done.

        Planning counts the moves already under way as done, so that two moves planned in
        one pass (or one pass and the next) do not both take the same room.  The new
        view's per-node use is the old one adjusted by the moves (not recounted).
        """
        changed = {
            name: msgspec.structs.replace(self.instances[name], primary_node=target)
            for name, target in moves
            if name in self.instances
        }
        if not changed:
            return self
        used = dict(_USED.get(self.instances))
        for name, inst in changed.items():
            _add_use(used, self.instances[name], -1)
            _add_use(used, inst, 1)
        instances = {**self.instances, **changed}
        _USED.put(instances, used)
        return ClusterView(nodes=self.nodes, instances=instances, vcpu_ratio=self.vcpu_ratio)


Instances = Mapping[str, InstanceFacts]
T = TypeVar("T")


class _IdentityMemo(Generic[T]):
    """What is derived from an instances mapping, by the mapping's identity: views are
    immutable, so placement and the drain core, which ask on every decision, derive it
    once per mapping.  Only the last few are kept (each with its mapping, so that an id
    stays its own)."""

    def __init__(self, derive: Callable[[Instances], T], size: int = 8) -> None:
        self._derive = derive
        self._size = size
        self._kept: dict[int, tuple[Instances, T]] = {}

    def get(self, instances: Instances) -> T:
        hit = self._kept.get(id(instances))
        if hit is not None and hit[0] is instances:
            return hit[1]
        value = self._derive(instances)
        self.put(instances, value)
        return value

    def put(self, instances: Instances, value: T) -> None:
        self._kept.pop(id(instances), None)
        self._kept[id(instances)] = (instances, value)
        while len(self._kept) > self._size:
            del self._kept[next(iter(self._kept))]  # the oldest


def _add_use(used: dict[str, tuple[int, int]], inst: InstanceFacts, sign: int) -> None:
    if inst.admin_state == "up":
        mem, cpus = used.get(inst.primary_node, (0, 0))
        used[inst.primary_node] = (mem + sign * inst.memory, cpus + sign * inst.vcpus)


def _sum_use(instances: Instances) -> dict[str, tuple[int, int]]:
    """node -> (MiB, vcpus) of its running primary instances."""
    used: dict[str, tuple[int, int]] = {}
    for inst in instances.values():
        _add_use(used, inst, 1)
    return used


def _group_by_node(instances: Instances) -> dict[str, list[str]]:
    """node -> the names of its primary instances."""
    by_node: dict[str, list[str]] = {}
    for inst in instances.values():
        by_node.setdefault(inst.primary_node, []).append(inst.name)
    return by_node


_USED = _IdentityMemo(_sum_use)
_BY_NODE = _IdentityMemo(_group_by_node, size=4)


def _num(value: Any, default: float) -> Any:
    return default if value is None else value


def view_from_config(doc: Mapping[str, Any]) -> ClusterView:
    """The view of a configuration document (as `get_config` returns it).

    Capacity fields (`mtotal`, `ctotal`, the cluster policy's `vcpu-ratio`) take their
    defaults (docs/contracts.md#room-on-nodes) when the document does not carry them.
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
    return ClusterView(nodes=nodes, instances=instances, vcpu_ratio=vcpu_ratio(cluster))


def capacity_key(view: ClusterView) -> str:
    """A fingerprint of where instances could go: each node's eligibility and room left.

    Two views with the same key offer exactly the same room on the same nodes, so a move
    that was refused for lack of room would be refused again; any change that could let
    it succeed (a node added, undrained or brought online, more memory, an instance
    stopped, removed or moved away) changes the key.
    """
    facts = sorted(
        (n.name, n.offline, n.drained, n.vm_capable, n.mtotal - view.used(n.name)[0], n.ctotal,
         view.used(n.name)[1])
        for n in view.nodes.values()
    )  # fmt: skip
    # A digest, not hash(): the key is stored in drain records and must survive a restart.
    encoded = msgspec.json.encode([view.vcpu_ratio, facts])
    return hashlib.blake2b(encoded, digest_size=12).hexdigest()


class NoRoom(Exception):
    """Placement found no node for an instance; the message says what is short."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


# (view, instance name, nodes it must not go to) -> the chosen node's name; raises NoRoom.
# The real one is the placement of docs/contracts.md#room-on-nodes; the drain core only
# calls it.
Placement = Callable[[ClusterView, str, frozenset[str]], str]


def place(view: ClusterView, instance: str, exclude: frozenset[str]) -> str:
    """The placement (client.capacity, the rule the opcodes use) on a view: the
    eligible node, not `exclude` nor the instance's own, with room and the most free
    memory; NoRoom with the placement's message (`no node has room for web3: …`)."""
    inst = view.instances[instance]
    running = inst.admin_state == "up"
    memory, vcpus = (inst.memory, inst.vcpus) if running else (0, 0)
    used = _USED.get(view.instances)  # once per call: placement asks for every node
    candidates = [_room(view, n, inst, memory, vcpus, used) for n in view.nodes.values()]
    skip = exclude | {inst.primary_node}
    room = choose(candidates, memory, vcpus, skip)
    if room is None:
        raise NoRoom(no_room_message(instance, inst.memory, inst.vcpus, candidates, skip))
    return room.name


def _room(
    view: ClusterView,
    node: NodeFacts,
    inst: InstanceFacts,
    memory: int,
    vcpus: int,
    used: Mapping[str, tuple[int, int]],
) -> Room:
    """The node's room as placement sees it for `inst` (not counting `inst` itself);
    `used` is the view's use per node."""
    mem, cpus = used.get(node.name, (0, 0))
    if node.name == inst.primary_node:
        mem, cpus = mem - memory, cpus - vcpus
    ok = eligible(node.offline, node.drained, node.vm_capable)
    return Room(node.name, node.name, node.mtotal, node.ctotal, view.vcpu_ratio, mem, cpus, ok)
