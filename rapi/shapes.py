"""Cluster objects in Ganeti's RAPI shapes (rlib2's N_FIELDS, I_FIELDS, G_FIELDS and the
info resource), with the fields Ganeti's cluster tools read (docs/contracts.md#rapi-paths).

htools' RAPI backend (hbal, hspace: `Ganeti/HTools/Backend/Rapi.hs`) reads groups `name
uuid alloc_policy ipolicy tags`; nodes `name offline drained vm_capable ndparams group.uuid
mtotal mnode mfree dtotal dfree ctotal cnos spfree tags`; instances `name pnode snodes
status disk_template disk_usage disk.sizes disk.spindles beparams oper_ram tags` (beparams
with `vcpus`, `auto_balance`, `spindle_use`); info `master tags ipolicy default_hypervisor`.
The simulated data plane maps onto them so those tools see the cluster placement sees:

- memory and CPUs come from `client.capacity` (mfree = mtotal - mnode - running memory,
  mnode 0); cnos 0, since `ctotal` counts the CPUs for instances;
- disks live on shared storage (`disk_template` "sharedfile"): no local disk or spindles;
- `default_hypervisor` is "fake": with other hypervisors htools reserve memory for the
  node's own use that these nodes do not have.

Pure functions over a `ConfigView`; the handlers in `rapi.cluster` do the I/O.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from client.capacity import is_running
from client.configview import ConfigView

DISK_TEMPLATE: Final = "sharedfile"
HYPERVISOR: Final = "fake"
ALLOC_POLICY: Final = "preferred"
NDPARAMS: Final = {"exclusive_storage": False, "spindle_count": 1, "oob_program": None}
# Ganeti's instance status for each admin_state of a simulated (always obedient) instance.
STATUS: Final = {"up": "running", "down": "ADMIN_down", "offline": "ADMIN_offline"}

Obj = Mapping[str, Any]


def node_role(node: Obj) -> str:
    """Ganeti's node role letter: O offline, D drained, C candidate, R regular."""
    if node.get("offline"):
        return "O"
    if node.get("drained"):
        return "D"
    if node.get("master_candidate"):
        return "C"
    return "R"


def master_name(view: ConfigView) -> str:
    """The node htools treat as the master: the first node by name ("" without nodes).

    The control plane's own node would be the better answer when it is a cluster node;
    the RAPI daemon has no notion of its node yet, so the first node stands in.
    """
    nodes = view.objects("nodes")
    return str(nodes[0]["name"]) if nodes else ""


def node_resource(view: ConfigView, node: Obj) -> dict[str, Any]:
    """A node in rlib2's N_FIELDS names (those that apply), its room included."""
    primary = view.primary_instances(node)
    secondary = view.secondary_instances(node)
    room = view.room(node)
    return {
        "name": node["name"],
        "uuid": node["uuid"],
        "offline": node.get("offline", False),
        "drained": node.get("drained", False),
        "master_candidate": node.get("master_candidate", False),
        "vm_capable": node.get("vm_capable", True),
        "master_capable": True,
        "role": node_role(node),
        "pip": node.get("primary_ip"),
        "sip": node.get("primary_ip"),
        "group.uuid": node.get("group"),
        "group": view.group_name(node.get("group")),
        "ndparams": dict(NDPARAMS),
        "mtotal": room.mtotal,
        "mnode": 0,
        "mfree": room.mfree,
        "dtotal": 0,
        "dfree": 0,
        "ctotal": room.ctotal,
        "cnos": 0,
        "cnodes": 1,
        "csockets": 1,
        "spfree": 0,
        "sptotal": 0,
        "pinst_cnt": len(primary),
        "pinst_list": primary,
        "sinst_cnt": len(secondary),
        "sinst_list": secondary,
        "serial_no": node.get("serial_no"),
        "ctime": node.get("ctime"),
        "mtime": node.get("mtime"),
        "tags": node.get("tags", []),
    }


def instance_resource(view: ConfigView, inst: Obj) -> dict[str, Any]:
    """An instance in rlib2's I_FIELDS names (those that apply)."""
    disks = inst.get("disks", [])
    nics = inst.get("nics", [])
    memory, vcpus = inst.get("memory"), inst.get("vcpus")
    running = is_running(inst)
    return {
        "name": inst["name"],
        "uuid": inst["uuid"],
        "admin_state": inst.get("admin_state"),
        "status": STATUS.get(str(inst.get("admin_state")), "ADMIN_down"),
        "oper_state": running,
        "oper_ram": memory if running else None,
        "oper_vcpus": vcpus if running else None,
        "pnode": view.node_name(inst.get("primary_node")),
        "snodes": [view.node_name(u) for u in inst.get("secondary_nodes", [])],
        "disk_template": DISK_TEMPLATE,
        "hypervisor": HYPERVISOR,
        "beparams": {
            "memory": memory,
            "maxmem": memory,
            "minmem": memory,
            "vcpus": vcpus,
            "auto_balance": True,
            "spindle_use": 1,
            "always_failover": False,
        },
        "disk.sizes": [d.get("size") for d in disks],
        "disk.spindles": [None for _ in disks],
        "disk.uuids": [d.get("uuid") for d in disks],
        "disk_usage": sum(int(d.get("size") or 0) for d in disks),
        "nic.macs": [n.get("mac") for n in nics],
        "nic.ips": [n.get("ip") for n in nics],
        "nic.networks": [n.get("network") for n in nics],
        "serial_no": inst.get("serial_no"),
        "ctime": inst.get("ctime"),
        "mtime": inst.get("mtime"),
        "tags": inst.get("tags", []),
    }


def group_resource(view: ConfigView, group: Obj) -> dict[str, Any]:
    """A node group in rlib2's G_FIELDS names; its policy is the cluster's."""
    nodes = [n["name"] for n in view.objects("nodes") if n.get("group") == group["uuid"]]
    return {
        "name": group["name"],
        "uuid": group["uuid"],
        "alloc_policy": ALLOC_POLICY,
        "ipolicy": view.config.get("cluster", {}).get("ipolicy", {}),
        "node_cnt": len(nodes),
        "node_list": nodes,
        "ndparams": dict(NDPARAMS),
        "diskparams": {},
        "networks": [],
        "serial_no": group.get("serial_no"),
        "ctime": group.get("ctime"),
        "mtime": group.get("mtime"),
        "tags": group.get("tags", []),
    }


def cluster_info(view: ConfigView) -> dict[str, Any]:
    """The cluster part of /2/info: Lockwarden's fields and those htools read."""
    cluster = view.config.get("cluster", {})
    return {
        "name": cluster.get("name"),
        "uuid": cluster.get("uuid"),
        "master": master_name(view),
        "default_hypervisor": HYPERVISOR,
        "enabled_hypervisors": [HYPERVISOR],
        "enabled_disk_templates": [DISK_TEMPLATE],
        "ipolicy": cluster.get("ipolicy", {}),
        "max_running_jobs": cluster.get("max_running_jobs"),
        "mac_prefix": cluster.get("mac_prefix"),
        "lock_enforcement": cluster.get("lock_enforcement"),
        "serial_no": cluster.get("serial_no"),
        "ctime": cluster.get("ctime"),
        "mtime": cluster.get("mtime"),
        "tags": cluster.get("tags", []),
    }
