"""Helpers shared by the built-in opcodes: lookups that fail with clear OpExecErrors,
node eligibility and load (the simulated data plane's placement rule).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from client.errors import NotFound
from jobproc.opcodes.context import ConfigObject, ConfigReader
from jobproc.opcodes.errors import ECODE_NOENT, ECODE_NORES, ECODE_STATE, OpExecError


def get_or_fail(config: ConfigReader, kind: str, key: str) -> ConfigObject:
    """The object, or OpExecError "<kind> '<key>' not found"."""
    try:
        return config.get_object(kind, key)
    except NotFound:
        raise OpExecError(f"{kind} {key!r} not found", ECODE_NOENT) from None


def exists(config: ConfigReader, kind: str, key: str) -> bool:
    """True if an object of `kind` has uuid or name `key`."""
    try:
        config.get_object(kind, key)
    except NotFound:
        return False
    return True


def node_name(config: ConfigReader, uuid: str) -> str:
    """The name of the node with `uuid` (the uuid itself if the node vanished)."""
    try:
        return str(config.get_object("node", uuid)["name"])
    except NotFound:
        return uuid


def instance_nodes(instance: ConfigObject) -> list[str]:
    """The uuids of an instance's nodes: primary first, then secondaries."""
    nodes = [str(instance["primary_node"])]
    nodes += [str(n) for n in instance.get("secondary_nodes") or () if n not in nodes]
    return nodes


def is_eligible(node: ConfigObject) -> bool:
    """May new instances go to this node?  Online, not drained, vm_capable."""
    return (
        not node.get("offline", False)
        and not node.get("drained", False)
        and node.get("vm_capable", True) is not False
    )


def check_eligible(node: ConfigObject, purpose: str) -> None:
    """OpExecError if `node` is offline, drained or not vm_capable."""
    for flag, word in (("offline", "offline"), ("drained", "drained")):
        if node.get(flag, False):
            raise OpExecError(f"node {node['name']!r} is {word}; cannot {purpose}", ECODE_STATE)
    if node.get("vm_capable", True) is False:
        raise OpExecError(
            f"node {node['name']!r} is not vm_capable; cannot {purpose}", ECODE_STATE
        )


def node_loads(instances: Iterable[ConfigObject]) -> dict[str, tuple[int, int]]:
    """Load per node uuid: (MiB of memory of its primary instances, their number)."""
    loads: dict[str, tuple[int, int]] = {}
    for inst in instances:
        mem, count = loads.get(str(inst["primary_node"]), (0, 0))
        loads[str(inst["primary_node"])] = (mem + int(inst.get("memory", 0)), count + 1)
    return loads


def least_loaded_node(
    config: ConfigReader, *, exclude: Iterable[str] = (), purpose: str = "place an instance"
) -> ConfigObject:
    """The eligible node with the least primary-instance memory (then count, then name).

    `exclude` holds node uuids.  OpExecError if no node is eligible.
    """
    skip = set(exclude)
    candidates = [
        n for n in config.list_objects("node") if is_eligible(n) and n["uuid"] not in skip
    ]
    if not candidates:
        raise OpExecError(
            f"no online, non-drained, vm_capable node to {purpose}", ECODE_NORES
        )
    loads = node_loads(config.list_objects("instance"))

    def key(node: ConfigObject) -> tuple[int, int, str]:
        mem, count = loads.get(str(node["uuid"]), (0, 0))
        return (mem, count, str(node["name"]))

    return min(candidates, key=key)


def changed(old: ConfigObject, new: dict[str, Any]) -> list[list[Any]]:
    """``[[field, new value], …]`` for the fields of `new` whose value differs in `old`."""
    return [[k, v] for k, v in new.items() if old.get(k) != v]
