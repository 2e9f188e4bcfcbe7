"""Uniqueness and reference checks of a config write
(docs/contracts.md#configuration-methods): names not taken, references (given as uuid or
name) resolved to uuids, NICs inside their networks, MACs unique.  Pure functions over the
ObjectIndex; ConfigState calls `prepare` on every add and update (and on every stored object
when it loads a snapshot).
"""

from __future__ import annotations

import ipaddress
from collections.abc import Callable
from typing import Any

import msgspec

from client.errors import AlreadyExists

from .indexes import ObjectIndex
from .objects import DEFAULT_GROUP_NAME, ConfigObject, Instance, Kind, Network, Nic, Node
from .validation import fail

UuidFactory = Callable[[], str]


def resolve(
    idx: ObjectIndex, kind: Kind, ref: str, owner_kind: Kind, owner: ConfigObject, field: str
) -> str:
    """A reference given as uuid or name, as the uuid (ConfigValidationError if none)."""
    obj = idx.lookup(kind, ref)
    if obj is None:
        raise fail(owner_kind, owner, field, f"no {kind} {ref!r}")
    return str(obj.uuid)


def default_group(idx: ObjectIndex, node: Node) -> str:
    """The group a node without `group` joins: "default", else the only group."""
    uuid = idx.names["nodegroup"].get(DEFAULT_GROUP_NAME)
    if uuid is not None:
        return uuid
    if len(idx.maps["nodegroup"]) == 1:
        return next(iter(idx.maps["nodegroup"]))
    raise fail("node", node, "group", "required: there is no group named 'default'")


def prepare(
    idx: ObjectIndex, kind: Kind, obj: Any, stored: Any, new_uuid: UuidFactory | None
) -> Any:
    """Uniqueness and reference checks; returns `obj` with references as uuids.

    `stored` is the object being updated (None for an add); `new_uuid` fills missing
    disk uuids on add (updates fill them after the idempotency check).
    """
    own_uuid = stored.uuid if stored is not None else obj.uuid
    if kind in idx.names:
        holder = idx.names[kind].get(obj.name)
        if holder is not None and holder != own_uuid:
            raise AlreadyExists(f"{kind} name {obj.name!r} is already taken", {"kind": kind})
        if obj.name in idx.maps[kind] and obj.name != own_uuid:
            raise AlreadyExists(
                f"{kind} name {obj.name!r} is the uuid of another {kind}", {"kind": kind}
            )
    if isinstance(obj, Node):
        group = obj.group or default_group(idx, obj)
        group = resolve(idx, "nodegroup", group, kind, obj, "group")
        if group != obj.group:
            obj = msgspec.structs.replace(obj, group=group)
    elif isinstance(obj, Instance):
        obj = _prepare_instance(idx, obj, own_uuid)
        if new_uuid is not None:
            obj = fill_disk_uuids(obj, new_uuid)
    elif isinstance(obj, Network) and stored is not None and obj.network != stored.network:
        _check_network_users(idx, obj, stored.uuid)
    return obj


def _prepare_instance(idx: ObjectIndex, obj: Instance, own_uuid: str) -> Instance:
    """Resolve and check an instance's nodes, NIC networks, IPs and MAC uniqueness."""
    primary = resolve(idx, "node", obj.primary_node, "instance", obj, "primary_node")
    secondaries: list[str] = []
    for i, ref in enumerate(obj.secondary_nodes):
        uuid = resolve(idx, "node", ref, "instance", obj, f"secondary_nodes[{i}]")
        if uuid == primary:
            raise fail("instance", obj, f"secondary_nodes[{i}]", "is the primary node")
        if uuid in secondaries:
            raise fail("instance", obj, f"secondary_nodes[{i}]", "listed twice")
        secondaries.append(uuid)
    nics: list[Nic] = []
    for i, nic in enumerate(obj.nics):
        holder = idx.macs.get(nic.mac)
        if holder is not None and holder != own_uuid:
            other = idx.maps["instance"][holder].name
            raise fail(
                "instance",
                obj,
                f"nics[{i}].mac",
                f"{nic.mac} is already used by instance {other!r}",
            )
        if nic.network is not None:
            net_uuid = resolve(idx, "network", nic.network, "instance", obj, f"nics[{i}].network")
            net = idx.maps["network"][net_uuid]
            if nic.ip is not None and not _ip_in(nic.ip, net.network):
                raise fail(
                    "instance",
                    obj,
                    f"nics[{i}].ip",
                    f"{nic.ip} is not inside network {net.name!r} ({net.network})",
                )
            if net_uuid != nic.network:
                nic = msgspec.structs.replace(nic, network=net_uuid)
        nics.append(nic)
    changes: dict[str, Any] = {}
    if primary != obj.primary_node:
        changes["primary_node"] = primary
    if tuple(secondaries) != obj.secondary_nodes:
        changes["secondary_nodes"] = tuple(secondaries)
    if tuple(nics) != obj.nics:
        changes["nics"] = tuple(nics)
    return msgspec.structs.replace(obj, **changes) if changes else obj


def _check_network_users(idx: ObjectIndex, net: Network, uuid: str) -> None:
    """A changed CIDR must still contain the IPs of the NICs on the network."""
    for inst_uuid in idx.net_refs.get(uuid, ()):
        inst = idx.maps["instance"][inst_uuid]
        for nic in inst.nics:
            if nic.network == uuid and nic.ip is not None and not _ip_in(nic.ip, net.network):
                raise fail(
                    "network",
                    net,
                    "network",
                    f"instance {inst.name!r} has IP {nic.ip} outside {net.network}",
                )


def fill_disk_uuids(obj: Instance, new_uuid: UuidFactory) -> Instance:
    """Give every disk without a uuid a new one."""
    if all(d.uuid for d in obj.disks):
        return obj
    disks = tuple(d if d.uuid else msgspec.structs.replace(d, uuid=new_uuid()) for d in obj.disks)
    return msgspec.structs.replace(obj, disks=disks)


def _ip_in(ip: str, cidr: str) -> bool:
    """Whether address `ip` lies in network `cidr` (both already validated)."""
    addr = ipaddress.ip_address(ip)
    net = ipaddress.ip_network(cidr)
    return addr.version == net.version and addr in net
