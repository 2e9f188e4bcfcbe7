"""The in-memory configuration and its operations (docs/contracts.md#configuration): pure,
O(1) per object.

`ConfigState` keeps the document's header (serial_no, times, cluster) and its objects in
an ObjectIndex (indexes.py: per-kind dicts, name and reverse-reference indexes), so
reading or writing one object never walks the config; a write's uniqueness and
reference checks are references.py.

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
from .indexes import ObjectIndex
from .objects import (
    DEFAULT_GROUP_NAME,
    DOC_FIELD,
    DOCUMENT_VERSION,
    Cluster,
    ConfigDocument,
    ConfigObject,
    Instance,
    Kind,
    MapObject,
    NodeGroup,
    check_kind,
    convert_object,
)
from .records import RECORD_KIND, ConfigChange, RemoveObject, put_record
from .references import UuidFactory, fill_disk_uuids, prepare
from .validation import check_cluster, check_fields, check_key, check_uuid, describe, fail

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
    """List order: by name; filters in their evaluation order (priority, watermark, uuid);
    drains by target; budgets by name."""
    if kind == "filter":
        return lambda f: (f.priority, f.watermark, f.uuid)
    if kind == "drain":
        return lambda d: (d.target,)
    if kind == "budget":
        return lambda b: (b.name,)
    return lambda o: (o.name, o.uuid)


class ConfigState:
    """The live configuration with its indexes; mutated only by `apply`."""

    __slots__ = (
        "_idx",
        "_json_cache",
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
        Without, the objects are trusted (a snapshot this code wrote from a checked state):
        stored as they are, and indexed when the indexes are first read.
        """
        self.version = document.version
        self.serial_no = document.serial_no
        self.ctime = document.ctime
        self.mtime = document.mtime
        self.cluster = document.cluster
        self._json_cache: bytes | None = None
        if document.version != DOCUMENT_VERSION:
            raise ConfigValidationError(
                f"config: field version: {document.version} is not {DOCUMENT_VERSION}"
            )
        # Dependency order, so references resolve against what is already indexed.
        order: tuple[Kind, ...] = (
            "nodegroup", "node", "network", "instance", "filter", "drain", "budget"
        )  # fmt: skip
        if not validate:  # trusted: stored as is, indexed when first needed
            self._idx = ObjectIndex.of({k: getattr(document, DOC_FIELD[k]) for k in order})
            return
        self._idx = ObjectIndex()
        cluster = check_cluster(document.cluster)
        check_uuid("cluster", cluster, cluster.uuid)
        self.cluster = cluster
        for kind in order:
            for key, obj in getattr(document, DOC_FIELD[kind]).items():
                if key != obj.uuid:
                    raise fail(kind, obj, "uuid", f"stored under the different key {key!r}")
                check_key(kind, obj)
                if obj.uuid in self._idx.names.get(kind, {}):
                    raise fail(kind, obj, "uuid", "equals the name of another object")
                self._idx.put(kind, prepare(self._idx, kind, check_fields(obj), None, new_uuid4))
        if not self._idx.maps["nodegroup"]:
            raise ConfigValidationError("config: field nodegroups: at least one node group needed")

    # ----------------------------------------------------------------- construction

    @classmethod
    def fresh(cls, now: float, new_uuid: UuidFactory = new_uuid4) -> ConfigState:
        """A fresh config: cluster "lockwarden", one node group "default"."""
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
        obj = self._idx.lookup(k, key)
        if obj is None:
            raise NotFound(f"{k} {key!r} not found", {"kind": k, "key": key})
        return obj

    def find(self, kind: Kind, key: str) -> MapObject | None:
        """The object of a map kind with uuid or name `key`, or None."""
        return self._idx.lookup(kind, key)

    def by_uuid(self, kind: Kind, uuid: str) -> MapObject | None:
        """The object of a map kind with uuid `uuid`, or None (never by name: no index is
        read, so a journal replay leaves them to be built when first read)."""
        return self._idx.maps[kind].get(uuid)

    def list_objects(self, kind: str) -> tuple[ConfigObject, ...]:
        """All objects of `kind`, by name (filters by priority, watermark, uuid); cached."""
        k = check_kind(kind)
        if k == "cluster":
            return (self.cluster,)
        cached = self._idx.list_cache.get(k)
        if cached is None:
            cached = tuple(sorted(self._idx.maps[k].values(), key=_sort_key(k)))
            self._idx.list_cache[k] = cached
        return cached

    def count(self, kind: Kind) -> int:
        """How many objects of `kind` there are."""
        return 1 if kind == "cluster" else len(self._idx.maps[kind])

    def get_config(self) -> ConfigDocument:
        """The whole document (a new Struct; the objects in it are shared and immutable)."""
        return ConfigDocument(
            version=self.version,
            serial_no=self.serial_no,
            ctime=self.ctime,
            mtime=self.mtime,
            cluster=self.cluster,
            nodegroups=dict(self._idx.maps["nodegroup"]),
            nodes=dict(self._idx.maps["node"]),
            instances=dict(self._idx.maps["instance"]),
            networks=dict(self._idx.maps["network"]),
            filters=dict(self._idx.maps["filter"]),
            drains=dict(self._idx.maps["drain"]),
            budgets=dict(self._idx.maps["budget"]),
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
                nodegroups=self._idx.maps["nodegroup"],
                nodes=self._idx.maps["node"],
                instances=self._idx.maps["instance"],
                networks=self._idx.maps["network"],
                filters=self._idx.maps["filter"],
                drains=self._idx.maps["drain"],
                budgets=self._idx.maps["budget"],
            )
            self._json_cache = _ENCODER.encode(doc)
        return self._json_cache

    def mac_in_use(self, mac: str) -> bool:
        """Whether a NIC of some instance has this MAC (lower-case form)."""
        return mac.lower() in self._idx.macs

    def instances_on_node(self, node_uuid: str) -> frozenset[str]:
        """Uuids of the instances whose primary or a secondary node is `node_uuid`."""
        return frozenset(self._idx.node_refs.get(node_uuid, ()))

    def room_used(self, node_uuid: str) -> tuple[int, int]:
        """(MiB, virtual CPUs) the node's running primary instances use
        (docs/contracts.md#room-on-nodes), from the node's own instances only."""
        instances = self._idx.maps["instance"]
        memory = cpus = 0
        for uuid in self._idx.node_refs.get(node_uuid, ()):
            inst = instances[uuid]
            if inst.primary_node == node_uuid and inst.admin_state == "up":
                memory += inst.memory
                cpus += inst.vcpus
        return memory, cpus

    def nodes_in_group(self, group_uuid: str) -> frozenset[str]:
        """Uuids of the nodes of node group `group_uuid`."""
        return frozenset(self._idx.group_nodes.get(group_uuid, ()))

    def instances_on_network(self, network_uuid: str) -> frozenset[str]:
        """Uuids of the instances with a NIC on network `network_uuid`."""
        return frozenset(self._idx.net_refs.get(network_uuid, ()))

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
            check_key(k, obj)
        else:
            obj = msgspec.structs.replace(obj, uuid=new_uuid())
        if obj.uuid in self._idx.maps[k] or obj.uuid in self._idx.names.get(k, ()):
            raise AlreadyExists(f"{k} uuid {obj.uuid!r} is already taken", {"kind": k})
        obj = prepare(self._idx, k, obj, None, new_uuid)
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
        obj = prepare(self._idx, k, obj, stored, None)
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
            obj = fill_disk_uuids(obj, new_uuid)
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
            users = [
                self._idx.maps["instance"][u].name for u in self._idx.node_refs.get(stored.uuid, ())
            ]
        elif k == "nodegroup":
            what = "it has nodes"
            users = [
                self._idx.maps["node"][u].name for u in self._idx.group_nodes.get(stored.uuid, ())
            ]
            if not users and len(self._idx.maps["nodegroup"]) == 1:
                raise fail(k, stored, "uuid", "the last node group cannot be removed")
        elif k == "network":
            what = "instance NICs use it"
            users = [
                self._idx.maps["instance"][u].name for u in self._idx.net_refs.get(stored.uuid, ())
            ]
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
            if record.kind not in self._idx.maps or record.uuid not in self._idx.maps[record.kind]:
                raise ChangeOutOfOrder(f"remove of unknown {record.kind} {record.uuid!r}")
            self._idx.remove(record.kind, record.uuid)
        else:
            kind = RECORD_KIND[type(record)]
            if kind == "cluster":
                self.cluster = record.obj  # type: ignore[assignment]
            else:
                self._idx.put(kind, record.obj)  # type: ignore[arg-type]
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
        old = None if kind == "cluster" else self._idx.maps[kind].get(uuid)
        undo = Undo(self.serial_no, self.mtime, self._json_cache, self.cluster, kind, uuid, old)
        self.apply(record)
        return undo

    def revert(self, undo: Undo) -> None:
        """Undo an `apply_undoable`; undo several in the reverse order of applying."""
        if undo.kind != "cluster":
            if undo.old is None:
                self._idx.remove(undo.kind, undo.uuid)
            else:
                self._idx.put(undo.kind, undo.old)
        self.cluster = undo.cluster
        self.serial_no = undo.serial_no
        self.mtime = undo.mtime
        self._json_cache = undo.json_cache

    # -------------------------------------------------------------------- helpers

    def _stored_for_update(self, kind: Kind, obj: ConfigObject) -> Any:
        """The stored object an update targets (by uuid, or by name without uuid)."""
        if kind == "cluster":
            if obj.uuid and obj.uuid != self.cluster.uuid:
                raise fail(kind, obj, "uuid", "the cluster's uuid cannot change")
            return self.cluster
        if obj.uuid:
            stored = self._idx.maps[kind].get(obj.uuid)
        elif kind in self._idx.names:
            uuid = self._idx.names[kind].get(obj.name)  # type: ignore[union-attr]
            stored = self._idx.maps[kind][uuid] if uuid is not None else None
        else:
            raise fail(kind, obj, "uuid", f"required to update a {kind}")
        if stored is None:
            raise NotFound(f"{describe(kind, obj)} not found", {"kind": kind})
        return stored

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


__all__ = ["ChangeOutOfOrder", "ConfigState", "Plan", "Undo", "new_uuid4"]
