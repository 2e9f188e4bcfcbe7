"""A thin, typed convenience layer over `WConfdClient` for job code (Ganeti's ConfigWriter).

    from client import WConfdClient
    from client.config_writer import ConfigWriter

    cfg = ConfigWriter(WConfdClient(job_id=42))
    node = cfg.get_node_info("node1")              # None if there is no such node
    for inst in cfg.get_node_instances("node1").primary:
        ...
    inst = cfg.get_instance_info("inst1")
    inst["memory"] = 2048
    cfg.update("instance", inst)                   # inst gets the new serial_no and mtime

Conventions:

- Objects are the plain dicts the daemon sends (SPEC §5), typed as TypedDicts below;
  references (a node's `group`, an instance's nodes, a NIC's `network`) are uuids.
- A `key` or `name` argument may be the object's name or its uuid (filters: uuid only).
- `get_<kind>_info(key)` returns None when the object does not exist; every other method
  raises the daemon's error (`client.errors.NotFound`, `LockNotHeld`, `StaleObjectError`,
  ...) unchanged.  `get_all_*_info()` return dicts keyed by uuid, as Ganeti's do.
- Writes need the locks SPEC §5 names (e.g. `instance/<name>` exclusively), held by the
  client's identity; this layer takes none itself.
- Each method is one RPC, except `get_node_instances` (two: the node, then the
  instances, filtered here - it is O(instances)).

Like everything in `client`, this imports no daemon package.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, Literal, NamedTuple, TypedDict, cast

from client import errors
from client.api.wconfd import Kind
from client.clients import WConfdClient

__all__ = [
    "ClusterInfo",
    "ConfigWriter",
    "DiskInfo",
    "FilterInfo",
    "InstanceInfo",
    "NetworkInfo",
    "NicInfo",
    "NodeGroupInfo",
    "NodeInfo",
    "NodeInstances",
    "UpdateInfo",
]


class ClusterInfo(TypedDict):
    """The cluster object."""

    uuid: str
    name: str
    serial_no: int
    ctime: float
    mtime: float
    max_running_jobs: int
    mac_prefix: str
    lock_enforcement: Literal["enforce", "warn"]
    tags: list[str]


class NodeGroupInfo(TypedDict):
    """A node group."""

    uuid: str
    name: str
    serial_no: int
    ctime: float
    mtime: float
    tags: list[str]


class NodeInfo(TypedDict):
    """A node; `group` is a node group uuid."""

    uuid: str
    name: str
    group: str
    primary_ip: str | None
    offline: bool
    drained: bool
    master_candidate: bool
    vm_capable: bool
    serial_no: int
    ctime: float
    mtime: float
    tags: list[str]


class DiskInfo(TypedDict):
    """An instance disk; `size` in MiB."""

    uuid: str
    size: int
    mode: Literal["rw", "ro"]


class NicInfo(TypedDict):
    """An instance NIC; `network` is a network uuid or None."""

    mac: str
    ip: str | None
    network: str | None


class InstanceInfo(TypedDict):
    """An instance; node references are node uuids, `memory` in MiB."""

    uuid: str
    name: str
    primary_node: str
    secondary_nodes: list[str]
    memory: int
    vcpus: int
    disks: list[DiskInfo]
    nics: list[NicInfo]
    admin_state: Literal["up", "down", "offline"]
    serial_no: int
    ctime: float
    mtime: float
    tags: list[str]


class NetworkInfo(TypedDict):
    """An IP network (CIDR) with an optional gateway."""

    uuid: str
    name: str
    network: str
    gateway: str | None
    serial_no: int
    ctime: float
    mtime: float
    tags: list[str]


class FilterInfo(TypedDict):
    """A job filter rule (SPEC §6.3)."""

    uuid: str
    priority: int
    watermark: int
    predicates: list[Any]
    action: Any
    reason_trail: list[Any]
    serial_no: int
    ctime: float
    mtime: float


class UpdateInfo(TypedDict):
    """What an update answers: the object's new serial_no and mtime."""

    serial_no: int
    mtime: float


class NodeInstances(NamedTuple):
    """The instances using a node: as their primary, and as one of their secondaries."""

    primary: list[InstanceInfo]
    secondary: list[InstanceInfo]


class ConfigWriter:
    """Typed, job-friendly reads and writes of the configuration through `client`."""

    def __init__(self, client: WConfdClient) -> None:
        """Wrap a (connected or not yet connected) wconfd client."""
        self.client = client

    # -- reads ---------------------------------------------------------------------------

    def get_config(self) -> dict[str, Any]:
        """The whole configuration document."""
        return cast(dict[str, Any], self.client.get_config())

    def get_config_serial(self) -> int:
        """The configuration's serial_no (changes with every write)."""
        return int(self.client.wait_config_change(since_serial=-1, timeout=0))

    def wait_for_change(self, since_serial: int, timeout: float) -> int:
        """The serial_no once it exceeds `since_serial`, or the current one at the timeout."""
        return int(self.client.wait_config_change(since_serial=since_serial, timeout=timeout))

    def get_cluster(self) -> ClusterInfo:
        """The cluster object."""
        return cast(ClusterInfo, self.client.get_object("cluster"))

    def get_nodegroup_info(self, key: str) -> NodeGroupInfo | None:
        """The node group named (or with uuid) `key`, or None."""
        return cast(NodeGroupInfo | None, self._get("nodegroup", key))

    def get_node_info(self, key: str) -> NodeInfo | None:
        """The node named (or with uuid) `key`, or None."""
        return cast(NodeInfo | None, self._get("node", key))

    def get_instance_info(self, key: str) -> InstanceInfo | None:
        """The instance named (or with uuid) `key`, or None."""
        return cast(InstanceInfo | None, self._get("instance", key))

    def get_network_info(self, key: str) -> NetworkInfo | None:
        """The network named (or with uuid) `key`, or None."""
        return cast(NetworkInfo | None, self._get("network", key))

    def get_filter_info(self, uuid: str) -> FilterInfo | None:
        """The filter rule with this uuid, or None."""
        return cast(FilterInfo | None, self._get("filter", uuid))

    def get_all_nodegroups_info(self) -> dict[str, NodeGroupInfo]:
        """Every node group, by uuid."""
        return cast(dict[str, NodeGroupInfo], self._all("nodegroup"))

    def get_all_nodes_info(self) -> dict[str, NodeInfo]:
        """Every node, by uuid."""
        return cast(dict[str, NodeInfo], self._all("node"))

    def get_all_instances_info(self) -> dict[str, InstanceInfo]:
        """Every instance, by uuid."""
        return cast(dict[str, InstanceInfo], self._all("instance"))

    def get_all_networks_info(self) -> dict[str, NetworkInfo]:
        """Every network, by uuid."""
        return cast(dict[str, NetworkInfo], self._all("network"))

    def get_node_instances(self, key: str) -> NodeInstances:
        """The instances with node `key` (name or uuid) as primary, and as a secondary.

        Raises `client.errors.NotFound` if there is no such node.
        """
        node = cast(NodeInfo, self.client.get_object("node", key))
        uuid = node["uuid"]
        primary: list[InstanceInfo] = []
        secondary: list[InstanceInfo] = []
        for inst in cast(list[InstanceInfo], self.client.list_objects("instance")):
            if inst["primary_node"] == uuid:
                primary.append(inst)
            elif uuid in inst["secondary_nodes"]:
                secondary.append(inst)
        return NodeInstances(primary, secondary)

    # -- writes --------------------------------------------------------------------------

    def add(self, kind: Kind, obj: Mapping[str, Any]) -> dict[str, Any]:
        """Add an object of `kind` (optional fields may be left out); the stored object."""
        return cast(dict[str, Any], self.client.add_object(kind, dict(obj)))

    def add_nodegroup(self, obj: Mapping[str, Any]) -> NodeGroupInfo:
        """Add a node group (needs `nodegroup/<name>`); the stored object."""
        return cast(NodeGroupInfo, self.add("nodegroup", obj))

    def add_node(self, obj: Mapping[str, Any]) -> NodeInfo:
        """Add a node (needs `node/<name>`); the stored object (`group` defaults to
        the group named "default")."""
        return cast(NodeInfo, self.add("node", obj))

    def add_instance(self, obj: Mapping[str, Any]) -> InstanceInfo:
        """Add an instance (needs `instance/<name>`); node and network references may be
        names; the stored object (with uuids)."""
        return cast(InstanceInfo, self.add("instance", obj))

    def add_network(self, obj: Mapping[str, Any]) -> NetworkInfo:
        """Add a network (needs `network/<name>`); the stored object."""
        return cast(NetworkInfo, self.add("network", obj))

    def update(self, kind: Kind, obj: MutableMapping[str, Any]) -> UpdateInfo:
        """Replace an object; `obj["serial_no"]` must be the stored one (StaleObjectError).

        On success `obj` gets the new serial_no and mtime, so it can be changed and
        updated again without re-reading.  Returns them too.
        """
        result = self.client.update_object(kind, dict(obj))
        obj["serial_no"] = result.serial_no
        obj["mtime"] = result.mtime
        return UpdateInfo(serial_no=result.serial_no, mtime=result.mtime)

    def remove(self, kind: Kind, key: str) -> None:
        """Remove an object by name or uuid (refused while others reference it)."""
        self.client.remove_object(kind, key)

    # -- reservations --------------------------------------------------------------------

    def generate_mac(self) -> str:
        """A free MAC with the cluster's prefix, reserved for this client."""
        return str(self.client.generate_mac())

    def reserve(self, namespace: str, value: str) -> None:
        """Reserve `value` in `namespace` for this client (ReservationError if taken)."""
        self.client.reserve(namespace, value)

    def release(self, namespace: str, value: str) -> None:
        """Drop one of this client's reservations (no-op if it holds none)."""
        self.client.release_reservation(namespace, value)

    def release_all(self, namespace: str | None = None) -> None:
        """Drop this client's reservations (of one namespace, or all)."""
        self.client.release_reservations(namespace)

    # -- helpers -------------------------------------------------------------------------

    def _get(self, kind: Kind, key: str) -> dict[str, Any] | None:
        try:
            return cast(dict[str, Any], self.client.get_object(kind, key))
        except errors.NotFound:
            return None

    def _all(self, kind: Kind) -> dict[str, dict[str, Any]]:
        return {obj["uuid"]: obj for obj in self.client.list_objects(kind)}
