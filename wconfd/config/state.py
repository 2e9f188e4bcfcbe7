"""The in-memory configuration and its operations (SPEC §5): pure, O(1) per object.

`ConfigState` keeps one dict per kind (uuid -> object), a name -> uuid index per named
kind, and reverse-reference indexes (instances per node and per network, nodes per group,
MAC -> instance), so reading or writing one object never walks the config.

Writes are two steps so that the daemon can persist between them:

    plan = state.update_object("node", obj, now)     # validate; nothing changes yet
    check_locks(...plan.locks...)                      # enforcement (enforcement.py)
    if plan.record is not None:
        await store.append(plan.record)                # durable first ...
        state.apply(plan.record)                       # ... then in memory
    return plan.result

Replaying a journal is `state.apply(record)` for each record: one code path.  A plan is
only valid against the state it was computed from: run a config write's plan → persist →
apply without another config write in between (one asyncio.Lock around it), or plan a group
of writes back to back with `apply_undoable` between them, `revert` them all, persist the
group as one write and apply each once durable (what wconfd's shell does, so concurrent
writes share one disk flush); `apply` raises ChangeOutOfOrder if that rule was broken,
before changing anything.
"""

from __future__ import annotations

import ipaddress
import uuid as uuid_module
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import msgspec

from client.errors import (
    AlreadyExists,
    ConfigValidationError,
    InvalidParams,
    NotFound,
    StaleObjectError,
)

from .enforcement import locks_for_write
from .objects import (
    DEFAULT_GROUP_NAME,
    DOC_FIELD,
    DOCUMENT_VERSION,
    MAP_KINDS,
    NAMED_KINDS,
    Cluster,
    ConfigDocument,
    ConfigObject,
    Instance,
    Kind,
    MapObject,
    Network,
    Nic,
    Node,
    NodeGroup,
    check_kind,
    convert_object,
)
from .records import RECORD_KIND, ConfigChange, RemoveObject, put_record
from .validation import check_cluster, check_fields, check_uuid, describe, fail

UuidFactory = Callable[[], str]
_ENCODER: Final = msgspec.json.Encoder()


def new_uuid4() -> str:
    """The default uuid factory: a random uuid4 string."""
    return str(uuid_module.uuid4())


class Plan(NamedTuple):
    """A validated write: the record to persist and apply (None: nothing to write, e.g. an
    idempotent retry), the RPC result, and the locks it needs exclusively (enforcement.py).
    """

    record: ConfigChange | None
    result: Any
    locks: tuple[str, ...]


class Undo(NamedTuple):
    """What `revert` needs to undo one `apply_undoable`: the state's header before it and
    the object the record replaced (None: it added one; the cluster for cluster records)."""

    serial_no: int
    mtime: float
    json_cache: bytes | None
    cluster: Cluster
    kind: Kind
    uuid: str
    old: Any


class ChangeOutOfOrder(RuntimeError):
    """A record does not follow the state's serial_no: a bug in the caller (two plans made
    against one state) or a journal that does not belong to this snapshot."""


def _sort_key(kind: Kind) -> Callable[[Any], tuple[Any, ...]]:
    """List order: by name; filters in their evaluation order (priority, watermark, uuid)."""
    if kind == "filter":
        return lambda f: (f.priority, f.watermark, f.uuid)
    return lambda o: (o.name, o.uuid)


class ConfigState:
    """The live configuration with its indexes; mutated only by `apply`."""

    __slots__ = (
        "_group_nodes",
        "_json_cache",
        "_list_cache",
        "_macs",
        "_maps",
        "_names",
        "_net_refs",
        "_node_refs",
        "cluster",
        "ctime",
        "mtime",
        "serial_no",
        "version",
    )

    def __init__(self, document: ConfigDocument, *, validate: bool = True) -> None:
        """Build the state and its indexes from a document (a snapshot or a fresh one).

        With `validate` every object is checked as if added (fields, uniqueness,
        references), so a hand-edited or damaged snapshot fails with ConfigValidationError.
        """
        self.version = document.version
        self.serial_no = document.serial_no
        self.ctime = document.ctime
        self.mtime = document.mtime
        self.cluster = document.cluster
        self._maps: dict[Kind, dict[str, Any]] = {kind: {} for kind in MAP_KINDS}
        self._names: dict[Kind, dict[str, str]] = {
            kind: {} for kind in NAMED_KINDS if kind != "cluster"
        }
        self._node_refs: dict[str, set[str]] = {}
        self._group_nodes: dict[str, set[str]] = {}
        self._net_refs: dict[str, set[str]] = {}
        self._macs: dict[str, str] = {}
        self._list_cache: dict[Kind, tuple[ConfigObject, ...]] = {}
        self._json_cache: bytes | None = None
        if document.version != DOCUMENT_VERSION:
            raise ConfigValidationError(
                f"config: field version: {document.version} is not {DOCUMENT_VERSION}"
            )
        if validate:
            cluster = check_cluster(document.cluster)
            check_uuid("cluster", cluster, cluster.uuid)
            self.cluster = cluster
        # Dependency order, so references resolve against what is already indexed.
        order: tuple[Kind, ...] = ("nodegroup", "node", "network", "instance", "filter")
        for kind in order:
            for key, obj in getattr(document, DOC_FIELD[kind]).items():
                if validate:
                    if key != obj.uuid:
                        raise fail(kind, obj, "uuid", f"stored under the different key {key!r}")
                    check_uuid(kind, obj, obj.uuid)
                    if obj.uuid in self._names.get(kind, {}):
                        raise fail(kind, obj, "uuid", "equals the name of another object")
                    obj = self._prepare(kind, check_fields(obj), None, new_uuid4)
                self._put(kind, obj)
        if validate and not self._maps["nodegroup"]:
            raise ConfigValidationError("config: field nodegroups: at least one node group needed")

    # ----------------------------------------------------------------- construction

    @classmethod
    def fresh(cls, now: float, new_uuid: UuidFactory = new_uuid4) -> ConfigState:
        """A fresh config (SPEC §5): cluster "lockwarden", one node group "default"."""
        cluster = Cluster(uuid=new_uuid(), serial_no=1, ctime=now, mtime=now)
        group = NodeGroup(
            uuid=new_uuid(), name=DEFAULT_GROUP_NAME, serial_no=1, ctime=now, mtime=now
        )
        doc = ConfigDocument(
            serial_no=1, ctime=now, mtime=now, cluster=cluster, nodegroups={group.uuid: group}
        )
        return cls(doc, validate=False)

    @classmethod
    def from_json(cls, data: bytes | str, *, validate: bool = True) -> ConfigState:
        """Decode a JSON document (a snapshot) and build the state from it.

        Type errors raise ConfigValidationError naming the path (this is stored state, not
        an RPC param).
        """
        try:
            doc = msgspec.json.decode(data, type=ConfigDocument)
        except msgspec.DecodeError as exc:
            raise ConfigValidationError(f"config: {exc}") from None
        return cls(doc, validate=validate)

    # ----------------------------------------------------------------------- reads

    @property
    def lock_enforcement(self) -> str:
        """The cluster's lock enforcement mode, "enforce" or "warn"."""
        return self.cluster.lock_enforcement

    def get_object(self, kind: str, key: object) -> ConfigObject:
        """The object of `kind` with uuid or name `key` (NotFound); cluster ignores key."""
        k = check_kind(kind)
        if k == "cluster":
            return self.cluster
        if not isinstance(key, str):
            raise InvalidParams("key: must be a string (a uuid or a name)", {"param": "key"})
        obj = self._lookup(k, key)
        if obj is None:
            raise NotFound(f"{k} {key!r} not found", {"kind": k, "key": key})
        return obj

    def find(self, kind: Kind, key: str) -> MapObject | None:
        """The object of a map kind with uuid or name `key`, or None."""
        return self._lookup(kind, key)

    def list_objects(self, kind: str) -> tuple[ConfigObject, ...]:
        """All objects of `kind`, by name (filters by priority, watermark, uuid); cached."""
        k = check_kind(kind)
        if k == "cluster":
            return (self.cluster,)
        cached = self._list_cache.get(k)
        if cached is None:
            cached = tuple(sorted(self._maps[k].values(), key=_sort_key(k)))
            self._list_cache[k] = cached
        return cached

    def count(self, kind: Kind) -> int:
        """How many objects of `kind` there are."""
        return 1 if kind == "cluster" else len(self._maps[kind])

    def get_config(self) -> ConfigDocument:
        """The whole document (a new Struct; the objects in it are shared and immutable)."""
        return ConfigDocument(
            version=self.version,
            serial_no=self.serial_no,
            ctime=self.ctime,
            mtime=self.mtime,
            cluster=self.cluster,
            nodegroups=dict(self._maps["nodegroup"]),
            nodes=dict(self._maps["node"]),
            instances=dict(self._maps["instance"]),
            networks=dict(self._maps["network"]),
            filters=dict(self._maps["filter"]),
        )

    def get_config_json(self) -> bytes:
        """The document as compact JSON, cached until the next change.

        Embed it in a reply as `msgspec.Raw(state.get_config_json())` to skip re-encoding;
        it is also what a snapshot stores.
        """
        if self._json_cache is None:
            doc = ConfigDocument(
                version=self.version,
                serial_no=self.serial_no,
                ctime=self.ctime,
                mtime=self.mtime,
                cluster=self.cluster,
                nodegroups=self._maps["nodegroup"],
                nodes=self._maps["node"],
                instances=self._maps["instance"],
                networks=self._maps["network"],
                filters=self._maps["filter"],
            )
            self._json_cache = _ENCODER.encode(doc)
        return self._json_cache

    def mac_in_use(self, mac: str) -> bool:
        """Whether a NIC of some instance has this MAC (lower-case form)."""
        return mac.lower() in self._macs

    def instances_on_node(self, node_uuid: str) -> frozenset[str]:
        """Uuids of the instances whose primary or a secondary node is `node_uuid`."""
        return frozenset(self._node_refs.get(node_uuid, ()))

    def nodes_in_group(self, group_uuid: str) -> frozenset[str]:
        """Uuids of the nodes of node group `group_uuid`."""
        return frozenset(self._group_nodes.get(group_uuid, ()))

    def instances_on_network(self, network_uuid: str) -> frozenset[str]:
        """Uuids of the instances with a NIC on network `network_uuid`."""
        return frozenset(self._net_refs.get(network_uuid, ()))

    # ---------------------------------------------------------------------- writes

    def add_object(
        self, kind: str, data: object, now: float, *, new_uuid: UuidFactory = new_uuid4
    ) -> Plan:
        """Plan an add: uuid generated if absent, serial_no 1, ctime = mtime = now.

        InvalidParams for ill-typed input, ConfigValidationError for bad values or
        references, AlreadyExists for a taken name or uuid.  Result: the stored object.
        """
        k = check_kind(kind)
        if k == "cluster":
            raise InvalidParams("kind: the cluster object cannot be added", {"param": "kind"})
        obj = check_fields(convert_object(k, data))
        if obj.uuid:
            check_uuid(k, obj, obj.uuid)
        else:
            obj = msgspec.structs.replace(obj, uuid=new_uuid())
        if obj.uuid in self._maps[k] or obj.uuid in self._names.get(k, ()):
            raise AlreadyExists(f"{k} uuid {obj.uuid!r} is already taken", {"kind": k})
        obj = self._prepare(k, obj, None, new_uuid)
        obj = msgspec.structs.replace(obj, serial_no=1, ctime=now, mtime=now)
        record = put_record(k, obj, self.serial_no + 1, now)
        return Plan(record, obj, locks_for_write(k, None, obj))

    def update_object(
        self, kind: str, data: object, now: float, *, new_uuid: UuidFactory = new_uuid4
    ) -> Plan:
        """Plan an update with optimistic concurrency.  Result: {"serial_no", "mtime"}.

        The object is found by uuid (or by name if its uuid is empty) and replaced whole.
        Its serial_no must equal the stored one (StaleObjectError); if the stored object
        already equals the given one with serial_no + 1 (ctime/mtime aside, and disks sent
        without uuid matching by position), it is an applied retry: no record.
        """
        k = check_kind(kind)
        obj = check_fields(convert_object(k, data))
        stored = self._stored_for_update(k, obj)
        obj = self._prepare(k, obj, stored, None)
        if obj.serial_no + 1 == stored.serial_no and self._same(obj, stored):
            result = {"serial_no": stored.serial_no, "mtime": stored.mtime}
            return Plan(None, result, locks_for_write(k, stored, stored))
        if obj.serial_no != stored.serial_no:
            raise StaleObjectError(
                f"{describe(k, stored)}: serial_no {obj.serial_no} is not the stored "
                f"{stored.serial_no}; re-read the object and retry",
                {"kind": k, "stored_serial_no": stored.serial_no},
            )
        if isinstance(obj, Instance):
            obj = self._fill_disk_uuids(obj, new_uuid)
        obj = msgspec.structs.replace(
            obj, uuid=stored.uuid, serial_no=stored.serial_no + 1, ctime=stored.ctime, mtime=now
        )
        record = put_record(k, obj, self.serial_no + 1, now)
        return Plan(
            record, {"serial_no": obj.serial_no, "mtime": now}, locks_for_write(k, stored, obj)
        )

    def remove_object(self, kind: str, key: object, now: float) -> Plan:
        """Plan a removal by uuid or name; refuses to leave dangling references.

        A node with instances, a group with nodes, a network with NICs on it and the last
        node group cannot go (ConfigValidationError).  Result: None.
        """
        k = check_kind(kind)
        if k == "cluster":
            raise InvalidParams("kind: the cluster object cannot be removed", {"param": "kind"})
        stored = self.get_object(k, key)
        users: list[str] = []
        what = ""
        if k == "node":
            what = "instances use it"
            users = [self._maps["instance"][u].name for u in self._node_refs.get(stored.uuid, ())]
        elif k == "nodegroup":
            what = "it has nodes"
            users = [self._maps["node"][u].name for u in self._group_nodes.get(stored.uuid, ())]
            if not users and len(self._maps["nodegroup"]) == 1:
                raise fail(k, stored, "uuid", "the last node group cannot be removed")
        elif k == "network":
            what = "instance NICs use it"
            users = [self._maps["instance"][u].name for u in self._net_refs.get(stored.uuid, ())]
        if users:
            names = sorted(users)
            shown = ", ".join(names[:10]) + (" ..." if len(names) > 10 else "")
            raise ConfigValidationError(
                f"{describe(k, stored)}: cannot remove, {what}: {shown}",
                {"kind": k, "object": getattr(stored, "name", stored.uuid), "users": names[:100]},
            )
        record = RemoveObject(serial_no=self.serial_no + 1, mtime=now, kind=k, uuid=stored.uuid)
        return Plan(record, None, locks_for_write(k, stored, None))

    def apply(self, record: ConfigChange) -> None:
        """Apply a change record (live path after persisting, and journal replay).

        Trusts the record's content (it was validated when planned); checks only that it
        follows this state's serial_no (ChangeOutOfOrder otherwise, nothing changed).
        """
        if record.serial_no != self.serial_no + 1:
            raise ChangeOutOfOrder(
                f"change record for config serial_no {record.serial_no} does not follow "
                f"the state's serial_no {self.serial_no}"
            )
        if isinstance(record, RemoveObject):
            if record.kind not in self._maps or record.uuid not in self._maps[record.kind]:
                raise ChangeOutOfOrder(f"remove of unknown {record.kind} {record.uuid!r}")
            self._remove(record.kind, record.uuid)
        else:
            kind = RECORD_KIND[type(record)]
            if kind == "cluster":
                self.cluster = record.obj  # type: ignore[assignment]
            else:
                self._put(kind, record.obj)  # type: ignore[arg-type]
        self.serial_no = record.serial_no
        self.mtime = record.mtime
        self._json_cache = None

    def apply_undoable(self, record: ConfigChange) -> Undo:
        """Apply `record` and return what `revert` needs to put the state back exactly.

        For a shell that plans several writes back to back before any is durable: plan,
        apply_undoable, plan the next against the result, ..., then revert them all (in
        reverse order) before anyone else reads, and apply each for real once durable.
        """
        if isinstance(record, RemoveObject):
            kind, uuid = record.kind, record.uuid
        else:
            kind, uuid = RECORD_KIND[type(record)], record.obj.uuid
        old = None if kind == "cluster" else self._maps[kind].get(uuid)
        undo = Undo(self.serial_no, self.mtime, self._json_cache, self.cluster, kind, uuid, old)
        self.apply(record)
        return undo

    def revert(self, undo: Undo) -> None:
        """Undo an `apply_undoable`; undo several in the reverse order of applying."""
        if undo.kind != "cluster":
            if undo.old is None:
                self._remove(undo.kind, undo.uuid)
            else:
                self._put(undo.kind, undo.old)
        self.cluster = undo.cluster
        self.serial_no = undo.serial_no
        self.mtime = undo.mtime
        self._json_cache = undo.json_cache

    # -------------------------------------------------------------------- helpers

    def _lookup(self, kind: Kind, key: str) -> Any:
        """Object of a map kind by uuid, then by name; None if neither."""
        objects = self._maps[kind]
        obj = objects.get(key)
        if obj is None and kind in self._names:
            uuid = self._names[kind].get(key)
            if uuid is not None:
                obj = objects[uuid]
        return obj

    def _stored_for_update(self, kind: Kind, obj: ConfigObject) -> Any:
        """The stored object an update targets (by uuid, or by name without uuid)."""
        if kind == "cluster":
            if obj.uuid and obj.uuid != self.cluster.uuid:
                raise fail(kind, obj, "uuid", "the cluster's uuid cannot change")
            return self.cluster
        if obj.uuid:
            stored = self._maps[kind].get(obj.uuid)
        elif kind in self._names:
            uuid = self._names[kind].get(obj.name)  # type: ignore[union-attr]
            stored = self._maps[kind][uuid] if uuid is not None else None
        else:
            raise fail(kind, obj, "uuid", "required to update a filter")
        if stored is None:
            raise NotFound(f"{describe(kind, obj)} not found", {"kind": kind})
        return stored

    def _resolve(
        self, kind: Kind, ref: str, owner_kind: Kind, owner: ConfigObject, field: str
    ) -> str:
        """A reference given as uuid or name, as the uuid (ConfigValidationError if none)."""
        obj = self._lookup(kind, ref)
        if obj is None:
            raise fail(owner_kind, owner, field, f"no {kind} {ref!r}")
        return str(obj.uuid)

    def _default_group(self, node: Node) -> str:
        """The group a node without `group` joins: "default", else the only group."""
        uuid = self._names["nodegroup"].get(DEFAULT_GROUP_NAME)
        if uuid is not None:
            return uuid
        if len(self._maps["nodegroup"]) == 1:
            return next(iter(self._maps["nodegroup"]))
        raise fail("node", node, "group", "required: there is no group named 'default'")

    def _prepare(self, kind: Kind, obj: Any, stored: Any, new_uuid: UuidFactory | None) -> Any:
        """Uniqueness and reference checks; returns `obj` with references as uuids.

        `stored` is the object being updated (None for an add); `new_uuid` fills missing
        disk uuids on add (updates fill them after the idempotency check).
        """
        own_uuid = stored.uuid if stored is not None else obj.uuid
        if kind in self._names:
            holder = self._names[kind].get(obj.name)
            if holder is not None and holder != own_uuid:
                raise AlreadyExists(f"{kind} name {obj.name!r} is already taken", {"kind": kind})
            if obj.name in self._maps[kind] and obj.name != own_uuid:
                raise AlreadyExists(
                    f"{kind} name {obj.name!r} is the uuid of another {kind}", {"kind": kind}
                )
        if isinstance(obj, Node):
            group = obj.group or self._default_group(obj)
            group = self._resolve("nodegroup", group, kind, obj, "group")
            if group != obj.group:
                obj = msgspec.structs.replace(obj, group=group)
        elif isinstance(obj, Instance):
            obj = self._prepare_instance(obj, own_uuid)
            if new_uuid is not None:
                obj = self._fill_disk_uuids(obj, new_uuid)
        elif isinstance(obj, Network) and stored is not None and obj.network != stored.network:
            self._check_network_users(obj, stored.uuid)
        return obj

    def _prepare_instance(self, obj: Instance, own_uuid: str) -> Instance:
        """Resolve and check an instance's nodes, NIC networks, IPs and MAC uniqueness."""
        primary = self._resolve("node", obj.primary_node, "instance", obj, "primary_node")
        secondaries: list[str] = []
        for i, ref in enumerate(obj.secondary_nodes):
            uuid = self._resolve("node", ref, "instance", obj, f"secondary_nodes[{i}]")
            if uuid == primary:
                raise fail("instance", obj, f"secondary_nodes[{i}]", "is the primary node")
            if uuid in secondaries:
                raise fail("instance", obj, f"secondary_nodes[{i}]", "listed twice")
            secondaries.append(uuid)
        nics: list[Nic] = []
        for i, nic in enumerate(obj.nics):
            holder = self._macs.get(nic.mac)
            if holder is not None and holder != own_uuid:
                other = self._maps["instance"][holder].name
                raise fail(
                    "instance",
                    obj,
                    f"nics[{i}].mac",
                    f"{nic.mac} is already used by instance {other!r}",
                )
            if nic.network is not None:
                net_uuid = self._resolve(
                    "network", nic.network, "instance", obj, f"nics[{i}].network"
                )
                net = self._maps["network"][net_uuid]
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

    def _check_network_users(self, net: Network, uuid: str) -> None:
        """A changed CIDR must still contain the IPs of the NICs on the network."""
        for inst_uuid in self._net_refs.get(uuid, ()):
            inst = self._maps["instance"][inst_uuid]
            for nic in inst.nics:
                if nic.network == uuid and nic.ip is not None and not _ip_in(nic.ip, net.network):
                    raise fail(
                        "network",
                        net,
                        "network",
                        f"instance {inst.name!r} has IP {nic.ip} outside {net.network}",
                    )

    @staticmethod
    def _fill_disk_uuids(obj: Instance, new_uuid: UuidFactory) -> Instance:
        """Give every disk without a uuid a new one."""
        if all(d.uuid for d in obj.disks):
            return obj
        disks = tuple(
            d if d.uuid else msgspec.structs.replace(d, uuid=new_uuid()) for d in obj.disks
        )
        return msgspec.structs.replace(obj, disks=disks)

    @staticmethod
    def _same(given: Any, stored: Any) -> bool:
        """Whether an update equals the stored object with serial_no + 1, mtime aside."""
        changes: dict[str, Any] = {
            "uuid": stored.uuid,
            "serial_no": stored.serial_no,
            "ctime": stored.ctime,
            "mtime": stored.mtime,
        }
        if isinstance(given, Instance) and len(given.disks) == len(stored.disks):
            changes["disks"] = tuple(
                d if d.uuid else msgspec.structs.replace(d, uuid=s.uuid)
                for d, s in zip(given.disks, stored.disks, strict=True)
            )
        return bool(msgspec.structs.replace(given, **changes) == stored)

    def _put(self, kind: Kind, obj: MapObject) -> None:
        """Store an object and update every index (replacing the old version)."""
        objects = self._maps[kind]
        old = objects.get(obj.uuid)
        if old is not None:
            self._unindex(kind, old)
        objects[obj.uuid] = obj
        self._index(kind, obj)
        self._list_cache.pop(kind, None)

    def _remove(self, kind: Kind, uuid: str) -> None:
        """Drop an object and its index entries."""
        old = self._maps[kind].pop(uuid)
        self._unindex(kind, old)
        self._list_cache.pop(kind, None)

    def _index(self, kind: Kind, obj: Any) -> None:
        """Add an object's entries to the name and reference indexes."""
        if kind in self._names:
            self._names[kind][obj.name] = obj.uuid
        if isinstance(obj, Node):
            self._group_nodes.setdefault(obj.group, set()).add(obj.uuid)
        elif isinstance(obj, Instance):
            for node in (obj.primary_node, *obj.secondary_nodes):
                self._node_refs.setdefault(node, set()).add(obj.uuid)
            for nic in obj.nics:
                self._macs[nic.mac] = obj.uuid
                if nic.network is not None:
                    self._net_refs.setdefault(nic.network, set()).add(obj.uuid)

    def _unindex(self, kind: Kind, obj: Any) -> None:
        """Remove an object's entries from the name and reference indexes."""
        if kind in self._names:
            self._names[kind].pop(obj.name, None)
        if isinstance(obj, Node):
            _discard(self._group_nodes, obj.group, obj.uuid)
        elif isinstance(obj, Instance):
            for node in (obj.primary_node, *obj.secondary_nodes):
                _discard(self._node_refs, node, obj.uuid)
            for nic in obj.nics:
                if self._macs.get(nic.mac) == obj.uuid:
                    del self._macs[nic.mac]
                if nic.network is not None:
                    _discard(self._net_refs, nic.network, obj.uuid)


def _discard(index: dict[str, set[str]], key: str, value: str) -> None:
    """Remove `value` from the set at `key`, dropping the set when it empties."""
    members = index.get(key)
    if members is not None:
        members.discard(value)
        if not members:
            del index[key]


def _ip_in(ip: str, cidr: str) -> bool:
    """Whether address `ip` lies in network `cidr` (both already validated)."""
    addr = ipaddress.ip_address(ip)
    net = ipaddress.ip_network(cidr)
    return addr.version == net.version and addr in net


__all__ = ["ChangeOutOfOrder", "ConfigState", "Plan", "Undo", "new_uuid4"]
