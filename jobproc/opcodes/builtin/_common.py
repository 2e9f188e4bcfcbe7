"""Helpers shared by the built-in opcodes: lookups that fail with clear OpExecErrors,
node eligibility and room (the placement rule of docs/contracts.md#room-on-nodes, from
`client.capacity`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from client.capacity import (
    Room,
    choose,
    is_running,
    no_room_message,
    node_full_message,
)
from client.errors import NotFound
from jobproc.locks import EXCLUSIVE, LockPhase, LockPlan, lock
from jobproc.opcodes.context import ConfigObject, ConfigReader
from jobproc.opcodes.errors import (
    ECODE_NOENT,
    ECODE_NORES,
    ECODE_STATE,
    OpExecError,
    OpPrereqError,
)


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


def check_eligible(node: ConfigObject, purpose: str) -> None:
    """OpPrereqError if `node` is offline, drained or not vm_capable."""
    for flag, word in (("offline", "offline"), ("drained", "drained")):
        if node.get(flag, False):
            raise OpPrereqError(f"node {node['name']!r} is {word}; cannot {purpose}", ECODE_STATE)
    if node.get("vm_capable", True) is False:
        raise OpPrereqError(
            f"node {node['name']!r} is not vm_capable; cannot {purpose}", ECODE_STATE
        )


def place(
    config: ConfigReader, instance: str, memory: int, vcpus: int, exclude: Iterable[str] = ()
) -> Room:
    """The node placement chooses for an instance of this size
    (docs/contracts.md#room-on-nodes); OpPrereqError saying what is short and where the most
    room is if no node has room."""
    current = config.node_rooms().values()
    room = choose(current, memory, vcpus, exclude)
    if room is None:
        raise OpPrereqError(no_room_message(instance, memory, vcpus, current, exclude), ECODE_NORES)
    return room


def check_room(
    config: ConfigReader, node: ConfigObject, instance: str, memory: int, vcpus: int
) -> None:
    """OpPrereqError unless the node has room for an instance of this size to run on it."""
    uuid = str(node["uuid"])
    room = config.node_rooms([uuid])[uuid]
    if not room.fits(memory, vcpus):
        raise OpPrereqError(node_full_message(instance, memory, vcpus, room), ECODE_NORES)


def node_lock_name(config: ConfigReader, key: str) -> str:
    """The name a node is locked under, for a node given by name or uuid."""
    try:
        return str(config.get_object("node", key)["name"])
    except NotFound:
        return key  # locks need not exist; execute reports the missing node


def nodes_phase(config: ConfigReader, instance_name: str, *, res: bool) -> LockPhase:
    """node/<n> (and node-res/<n> if `res`) exclusive for every node of the instance."""
    inst = get_or_fail(config, "instance", instance_name)
    names = [node_name(config, n) for n in instance_nodes(inst)]
    levels = ("node", "node-res") if res else ("node",)
    return LockPhase.of((lock(lv, n), EXCLUSIVE) for n in names for lv in levels)


def instance_plan(name: str, then: Callable[[ConfigReader], LockPhase]) -> LockPlan:
    """instance/<name> exclusive, then (phase 1, read under that lock) what `then` gives:
    the two phases of Ganeti's DeclareLocks for an opcode on one instance."""
    return LockPlan(phases=(LockPhase.of([(lock("instance", name), EXCLUSIVE)]), then))


def uses_room(instance: ConfigObject) -> tuple[int, int]:
    """(memory, vcpus) the instance needs on a node it moves to: nothing if it is not up."""
    if not is_running(instance):
        return 0, 0
    return int(instance.get("memory", 0)), int(instance.get("vcpus", 0))


def changed(old: ConfigObject, new: dict[str, Any]) -> list[list[Any]]:
    """``[[field, new value], …]`` for the fields of `new` whose value differs in `old`."""
    return [[k, v] for k, v in new.items() if old.get(k) != v]
