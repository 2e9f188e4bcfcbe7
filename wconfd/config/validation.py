"""Field checks of single objects: values in range, well-formed names, addresses, MACs.

Pure functions with no view of the rest of the config (references and uniqueness are
checked in `state.py`, which has the indexes).  Every failure is a ConfigValidationError
whose message names the object and the field; values are normalised where there is one
canonical spelling (MACs lower case, IPs and CIDRs in `ipaddress` form) so comparisons
and uniqueness checks see one form.
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Final

import msgspec

from client.budgets import budget_problem
from client.errors import ConfigValidationError, FilterError
from client.filterrules import check_filter_object
from client.names import HOST_NAME_RULE, TAG_RULE, is_host_name, is_tag
from client.vocabulary import LOCKSET

from .objects import (
    Budget,
    Cluster,
    ConfigObject,
    Disk,
    Drain,
    Filter,
    Instance,
    IPolicy,
    Network,
    Nic,
    Node,
    NodeGroup,
)

MAX_NAME_LENGTH: Final = 255
MAX_TAGS: Final = 4096

_MAC_RE: Final = re.compile(r"[0-9a-f]{2}(?::[0-9a-f]{2}){5}")
_MAC_PREFIX_RE: Final = re.compile(r"[0-9a-f]{2}(?::[0-9a-f]{2}){2}")
_UUID_RE: Final = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}")
_CONTROL_RE: Final = re.compile(r"[\x00-\x1f\x7f]")


def describe(kind: str, obj: ConfigObject) -> str:
    """How messages name an object: `node 'n1'`, `filter 'uuid'`, `cluster 'lockwarden'`."""
    label = getattr(obj, "name", None) or getattr(obj, "target", None) or obj.uuid or "<new>"
    return f"{kind} {label!r}"


def fail(kind: str, obj: ConfigObject, field: str, problem: str) -> ConfigValidationError:
    """A ConfigValidationError naming the object and the field (data carries both)."""
    return ConfigValidationError(
        f"{describe(kind, obj)}: field {field}: {problem}",
        {"kind": kind, "object": getattr(obj, "name", None) or obj.uuid, "field": field},
    )


def check_name(kind: str, obj: ConfigObject, name: str) -> None:
    """Names are lock member names: non-empty, no '/', not '[lockset]'."""
    if not name:
        raise fail(kind, obj, "name", "must not be empty")
    if len(name) > MAX_NAME_LENGTH:
        raise fail(kind, obj, "name", f"longer than {MAX_NAME_LENGTH} characters")
    if "/" in name:
        raise fail(kind, obj, "name", "must not contain '/' (it is part of a lock name)")
    if name == LOCKSET:
        raise fail(kind, obj, "name", f"{LOCKSET!r} is reserved for locksets")
    if name != name.strip() or _CONTROL_RE.search(name):
        raise fail(kind, obj, "name", "must not have surrounding spaces or control characters")


def check_host_name(kind: str, obj: ConfigObject, name: str, field: str = "name") -> None:
    """Node, instance, node group and network names are host names (client.names)."""
    if not is_host_name(name):
        raise fail(kind, obj, field, f"{name!r} is not {HOST_NAME_RULE}")


def check_uuid(kind: str, obj: ConfigObject, value: str, field: str = "uuid") -> None:
    """A uuid is 1-128 characters of [A-Za-z0-9._:-] (uuid4 strings and simple test ids)."""
    if not _UUID_RE.fullmatch(value):
        raise fail(kind, obj, field, f"{value!r} is not a valid uuid")


def check_tags(kind: str, obj: ConfigObject, tags: tuple[str, ...]) -> None:
    """Tags follow client.names' rule; no duplicates, at most 4096."""
    if len(tags) > MAX_TAGS:
        raise fail(kind, obj, "tags", f"more than {MAX_TAGS} tags")
    for tag in tags:
        if not is_tag(tag):
            raise fail(kind, obj, "tags", f"tag {tag!r} is not {TAG_RULE}")
    if len(set(tags)) != len(tags):
        raise fail(kind, obj, "tags", "duplicate tags")


def normalize_mac(value: str) -> str | None:
    """The lower-case form of a MAC `xx:xx:xx:xx:xx:xx`, or None if it is not one."""
    mac = value.lower()
    return mac if _MAC_RE.fullmatch(mac) else None


def normalize_ip(value: str) -> str | None:
    """The canonical text of an IPv4/IPv6 address, or None if it is not one."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        return None


def _check_times(kind: str, obj: ConfigObject) -> None:
    """serial_no is non-negative and timestamps are finite (they come from the wire)."""
    if obj.serial_no < 0:
        raise fail(kind, obj, "serial_no", "must be >= 0")
    for field in ("ctime", "mtime"):
        if not math.isfinite(getattr(obj, field)):
            raise fail(kind, obj, field, "must be a finite number")


def _check_ipolicy(obj: Cluster, policy: IPolicy) -> None:
    """Positive finite ratios, a non-empty template list, and min <= std <= max."""
    for field, ratio in (
        ("vcpu-ratio", policy.vcpu_ratio),
        ("spindle-ratio", policy.spindle_ratio),
    ):
        if not (math.isfinite(ratio) and ratio > 0):
            raise fail("cluster", obj, f"ipolicy.{field}", "must be a positive number")
    if not policy.disk_templates:
        raise fail("cluster", obj, "ipolicy.disk-templates", "must name at least one template")
    if not policy.minmax:
        raise fail("cluster", obj, "ipolicy.minmax", "must hold at least one min/max pair")
    for i, pair in enumerate(policy.minmax):
        for spec in msgspec.structs.fields(pair.min):
            low, high = getattr(pair.min, spec.name), getattr(pair.max, spec.name)
            if not 0 <= low <= high:
                raise fail(
                    "cluster", obj, f"ipolicy.minmax[{i}].{spec.encode_name}",
                    f"min {low} and max {high} must satisfy 0 <= min <= max",
                )  # fmt: skip


def check_cluster(obj: Cluster) -> Cluster:
    """Range checks of the cluster object; returns it with the MAC prefix lower-cased."""
    _check_times("cluster", obj)
    check_name("cluster", obj, obj.name)
    if obj.max_running_jobs < 1:
        raise fail("cluster", obj, "max_running_jobs", "must be >= 1")
    _check_ipolicy(obj, obj.ipolicy)
    prefix = obj.mac_prefix.lower()
    if not _MAC_PREFIX_RE.fullmatch(prefix):
        raise fail("cluster", obj, "mac_prefix", f"{obj.mac_prefix!r} is not of the form xx:xx:xx")
    check_tags("cluster", obj, obj.tags)
    return obj if prefix == obj.mac_prefix else msgspec.structs.replace(obj, mac_prefix=prefix)


def check_nodegroup(obj: NodeGroup) -> NodeGroup:
    """Field checks of a node group."""
    _check_times("nodegroup", obj)
    check_host_name("nodegroup", obj, obj.name)
    check_tags("nodegroup", obj, obj.tags)
    return obj


def check_node(obj: Node) -> Node:
    """Field checks of a node; returns it with `primary_ip` in canonical form."""
    _check_times("node", obj)
    check_host_name("node", obj, obj.name)
    check_tags("node", obj, obj.tags)
    for field in ("mtotal", "ctotal"):
        if getattr(obj, field) < 0:
            raise fail("node", obj, field, "must be >= 0")
    if obj.primary_ip is None:
        return obj
    ip = normalize_ip(obj.primary_ip)
    if ip is None:
        raise fail("node", obj, "primary_ip", f"{obj.primary_ip!r} is not an IP address")
    return obj if ip == obj.primary_ip else msgspec.structs.replace(obj, primary_ip=ip)


def check_network(obj: Network) -> Network:
    """Field checks of a network: a strict CIDR (no host bits) and a gateway inside it."""
    _check_times("network", obj)
    check_host_name("network", obj, obj.name)
    check_tags("network", obj, obj.tags)
    try:
        net = ipaddress.ip_network(obj.network, strict=True)
    except ValueError as exc:
        raise fail(
            "network", obj, "network", f"{obj.network!r} is not a CIDR network ({exc})"
        ) from None
    gateway = obj.gateway
    if gateway is not None:
        try:
            gw = ipaddress.ip_address(gateway)
        except ValueError:
            raise fail("network", obj, "gateway", f"{gateway!r} is not an IP address") from None
        if gw.version != net.version or gw not in net:
            raise fail("network", obj, "gateway", f"{gateway} is not inside {net}")
        gateway = str(gw)
    if str(net) == obj.network and gateway == obj.gateway:
        return obj
    return msgspec.structs.replace(obj, network=str(net), gateway=gateway)


def check_instance(obj: Instance) -> Instance:
    """Field checks of an instance (not its references): sizes > 0, MACs and IPs valid."""
    _check_times("instance", obj)
    check_host_name("instance", obj, obj.name)
    check_tags("instance", obj, obj.tags)
    if obj.memory <= 0:
        raise fail("instance", obj, "memory", "must be > 0 (MiB)")
    if obj.vcpus <= 0:
        raise fail("instance", obj, "vcpus", "must be > 0")
    disks: list[Disk] = []
    for i, disk in enumerate(obj.disks):
        if disk.size <= 0:
            raise fail("instance", obj, f"disks[{i}].size", "must be > 0 (MiB)")
        if disk.uuid:
            check_uuid("instance", obj, disk.uuid, f"disks[{i}].uuid")
        disks.append(disk)
    disk_uuids = [d.uuid for d in disks if d.uuid]
    if len(set(disk_uuids)) != len(disk_uuids):
        raise fail("instance", obj, "disks", "duplicate disk uuids")
    nics: list[Nic] = []
    for i, nic in enumerate(obj.nics):
        mac = normalize_mac(nic.mac)
        if mac is None:
            raise fail("instance", obj, f"nics[{i}].mac", f"{nic.mac!r} is not a MAC address")
        ip = nic.ip
        if ip is not None:
            ip = normalize_ip(ip)
            if ip is None:
                raise fail("instance", obj, f"nics[{i}].ip", f"{nic.ip!r} is not an IP address")
        if mac != nic.mac or ip != nic.ip:
            nic = msgspec.structs.replace(nic, mac=mac, ip=ip)
        nics.append(nic)
    macs = [n.mac for n in nics]
    if len(set(macs)) != len(macs):
        raise fail("instance", obj, "nics", "the same MAC on two NICs")
    if tuple(nics) != obj.nics:
        obj = msgspec.structs.replace(obj, nics=tuple(nics))
    return obj


def check_filter(obj: Filter) -> Filter:
    """A filter rule: the add-time checks of docs/contracts.md#filters, client.filterrules'
    (the same checks luxid's replace_filter makes; a client's write meets them first as
    FilterError), and the action as a list."""
    _check_times("filter", obj)
    try:
        rule = msgspec.to_builtins(obj)
        del rule["uuid"]  # the client's uuid was checked at the edge; wconfd's own is good
        check_filter_object(rule)
    except FilterError as exc:
        field, _, why = exc.message.partition(": ")  # FilterError names the part first
        raise fail("filter", obj, field, why or exc.message) from None
    if isinstance(obj.action, tuple):
        return msgspec.structs.replace(obj, action=list(obj.action))
    return obj


def check_drain(obj: Drain) -> Drain:
    """A drain's key is its target, `queue` or `node/<name>`; its uuid is the target."""
    _check_times("drain", obj)
    if obj.target != "queue":
        node = obj.target.removeprefix("node/")
        if node == obj.target:
            raise fail("drain", obj, "target", 'must be "queue" or "node/<name>"')
        check_host_name("drain", obj, node, "target")
    if obj.uuid not in ("", obj.target):
        raise fail("drain", obj, "uuid", f"must be empty or the target {obj.target!r}")
    if obj.max_parallel < 1:
        raise fail("drain", obj, "max_parallel", "must be >= 1")
    return obj if obj.uuid else msgspec.structs.replace(obj, uuid=obj.target)


def check_budget(obj: Budget) -> Budget:
    """A budget (client.budgets' rules); its key and uuid are its name."""
    _check_times("budget", obj)
    problem = budget_problem(obj.name, obj.tags, obj.max_disrupted)
    if problem is not None:
        raise fail("budget", obj, *problem)
    if obj.uuid not in ("", obj.name):
        raise fail("budget", obj, "uuid", f"must be empty or the name {obj.name!r}")
    return obj if obj.uuid else msgspec.structs.replace(obj, uuid=obj.name)


def check_key(kind: str, obj: ConfigObject) -> None:
    """The object's map key: a uuid (a drain's is its target, a budget's its name, checked
    by check_drain and check_budget)."""
    if kind not in ("drain", "budget"):
        check_uuid(kind, obj, obj.uuid)


def check_fields(obj: ConfigObject) -> ConfigObject:
    """Dispatch the field checks by type; returns the normalised object."""
    if isinstance(obj, Instance):
        return check_instance(obj)
    if isinstance(obj, Node):
        return check_node(obj)
    if isinstance(obj, Filter):
        return check_filter(obj)
    if isinstance(obj, Drain):
        return check_drain(obj)
    if isinstance(obj, Budget):
        return check_budget(obj)
    if isinstance(obj, Network):
        return check_network(obj)
    if isinstance(obj, NodeGroup):
        return check_nodegroup(obj)
    return check_cluster(obj)
