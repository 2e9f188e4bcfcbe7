"""Room on nodes (docs/capacity.md): free memory and CPU computed from the instances that are up,
and the placement rule that every opcode, drain and view shares.

Pure functions over the configuration as plain data (the mappings of `get_config`,
`get_object` and `list_objects`): nothing here is stored, so a view and a placement
decision made from the same configuration always agree.

- An instance whose `admin_state` is "up" uses its `memory` (MiB) and `vcpus` on its
  primary node; disks live on shared storage and use no room on a node.
- `mfree` = `mtotal` - that memory; the CPU limit is `ctotal` x the cluster policy's
  `vcpu-ratio`.
- Placement picks, among eligible nodes (online, not drained, vm_capable) not excluded
  that have room, the one with the most free memory, then the first by name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

Obj = Mapping[str, Any]

DEFAULT_MTOTAL: Final = 65536  # MiB for instances on a node; wconfd's Node default too
DEFAULT_CTOTAL: Final = 32  # physical CPUs of a node
DEFAULT_VCPU_RATIO: Final = 4.0  # Ganeti's default ipolicy vcpu-ratio


@dataclass(frozen=True)
class Room:
    """One node's capacity and what its running primary instances use of it."""

    uuid: str
    name: str
    mtotal: int
    ctotal: int
    vcpu_ratio: float
    mused: int = 0
    cused: int = 0  # virtual CPUs of the running primary instances
    eligible: bool = True

    @property
    def mfree(self) -> int:
        """MiB of memory not used by running instances (negative if over-committed)."""
        return self.mtotal - self.mused

    @property
    def climit(self) -> float:
        """How many virtual CPUs the node may run: ctotal x vcpu_ratio."""
        return self.ctotal * self.vcpu_ratio

    @property
    def cfree(self) -> float:
        """Virtual CPUs still available under the limit."""
        return self.climit - self.cused

    def fits(self, memory: int, vcpus: int) -> bool:
        """Would an instance of this size, started here, stay within both limits?"""
        return memory <= self.mfree and self.cused + vcpus <= self.climit

    def with_instance(self, memory: int, vcpus: int) -> Room:
        """This node once an instance of this size runs on it too."""
        return Room(
            self.uuid, self.name, self.mtotal, self.ctotal, self.vcpu_ratio,
            self.mused + memory, self.cused + vcpus, self.eligible,
        )  # fmt: skip


def is_eligible(node: Obj) -> bool:
    """May instances be placed on this node?  Online, not drained, vm_capable."""
    return eligible(
        node.get("offline", False), node.get("drained", False), node.get("vm_capable", True)
    )


def eligible(offline: bool, drained: bool, vm_capable: bool) -> bool:
    """The rule of `is_eligible` on a node's three flags (for typed node records)."""
    return not offline and not drained and vm_capable is not False


def is_running(instance: Obj) -> bool:
    """Does the instance use room on its primary node (admin_state "up")?"""
    return instance.get("admin_state", "down") == "up"


def vcpu_ratio(cluster: Obj) -> float:
    """The cluster policy's virtual-to-physical CPU ratio."""
    policy = cluster.get("ipolicy") or {}
    return float(policy.get("vcpu-ratio", DEFAULT_VCPU_RATIO))


def rooms(nodes: Iterable[Obj], instances: Iterable[Obj], ratio: float) -> dict[str, Room]:
    """The room of every node, by node uuid."""
    used: dict[str, tuple[int, int]] = {}
    for inst in instances:
        if is_running(inst):
            pnode = str(inst["primary_node"])
            mem, cpus = used.get(pnode, (0, 0))
            used[pnode] = (mem + int(inst.get("memory", 0)), cpus + int(inst.get("vcpus", 0)))
    out: dict[str, Room] = {}
    for node in nodes:
        uuid = str(node["uuid"])
        mem, cpus = used.get(uuid, (0, 0))
        out[uuid] = Room(
            uuid, str(node["name"]), int(node.get("mtotal", DEFAULT_MTOTAL)),
            int(node.get("ctotal", DEFAULT_CTOTAL)), ratio, mem, cpus, is_eligible(node),
        )  # fmt: skip
    return out


def config_rooms(config: Obj) -> dict[str, Room]:
    """The room of every node of a `get_config` document, by node uuid."""
    return rooms(
        config.get("nodes", {}).values(),
        config.get("instances", {}).values(),
        vcpu_ratio(config.get("cluster", {})),
    )


def choose(
    candidates: Iterable[Room], memory: int, vcpus: int, exclude: Iterable[str] = ()
) -> Room | None:
    """The eligible node (not in `exclude`, uuids) with room and the most free memory,
    then the first by name; None if no node has room."""
    skip = set(exclude)
    fitting = [r for r in candidates if r.eligible and r.uuid not in skip and r.fits(memory, vcpus)]
    return min(fitting, key=lambda r: (-r.mfree, r.name), default=None)


def _cpus(value: float) -> str:
    """`1 CPU`, `2 CPUs`, `0.5 CPUs`."""
    number = str(int(value)) if float(value).is_integer() else f"{value:g}"
    return f"{number} CPU{'' if value == 1 else 's'}"


def _needs(memory: int, vcpus: int) -> str:
    return f"it needs {memory} MiB and {_cpus(vcpus)}"


def _short(room: Room, memory: int) -> str:
    """What a node has, said the way the shortage shows: memory, and CPUs if they are short."""
    text = f"{room.name} with {room.mfree} MiB"
    if room.mfree >= memory:
        text += f" but {_cpus(room.cfree)} free"
    return text


def no_room_message(
    instance: str, memory: int, vcpus: int, candidates: Iterable[Room], exclude: Iterable[str] = ()
) -> str:
    """Why `choose` found nothing: `no node has room for web3: it needs 4096 MiB and
    2 CPUs; most free: node3 with 2048 MiB`."""
    skip = set(exclude)
    eligible = [r for r in candidates if r.eligible and r.uuid not in skip]
    head = f"no node has room for {instance}: {_needs(memory, vcpus)}"
    if not eligible:
        return f"{head}; no online, non-drained, vm_capable node can take it"
    best = min(eligible, key=lambda r: (-r.mfree, r.name))
    return f"{head}; most free: {_short(best, memory)}"


def node_full_message(instance: str, memory: int, vcpus: int, room: Room) -> str:
    """Why a named node cannot take the instance: `node node2 has no room for web3: it
    needs 4096 MiB and 2 CPUs; it has 2048 MiB and 100 CPUs free`."""
    return (
        f"node {room.name} has no room for {instance}: {_needs(memory, vcpus)};"
        f" it has {room.mfree} MiB and {_cpus(room.cfree)} free"
    )
