"""The stored objects of the configuration and the indexes over them
(docs/contracts.md#configuration-document).

One dict per kind (uuid -> object), a name -> uuid index per named kind, and
reverse-reference indexes (instances per node and per network, nodes per group, MAC ->
instance), so finding an object or its users never walks the config.  Pure data; the
ConfigState (state.py) decides what to store.

Objects stored in bulk (`ObjectIndex.of`: a snapshot, then the journal replayed over it)
leave the indexes to be built in one pass each when first read: keeping them up to date
object by object through 100,000 adds and updates cost a third of a restart
(docs/contracts.md#performance-targets).  The names and the references are two passes, so
a read by name (most calls) does not wait for the reference indexes, which only writes
and a few reads need.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Generic, Literal, TypeVar

from .objects import MAP_KINDS, NAMED_KINDS, ConfigObject, Instance, Kind, MapObject, Node

T = TypeVar("T")


class _Built(Generic[T]):
    """An index of ObjectIndex read through its slot `_NAME`, its group (`names` or
    `refs`) built first if that group is stale."""

    def __init__(self, group: Literal["names", "refs"]) -> None:
        self.group = group

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_" + name

    def __get__(self, idx: ObjectIndex, owner: type | None = None) -> T:
        if self.group in idx._stale:
            idx._build(self.group)
        value: T = getattr(idx, self.slot)
        return value


class ObjectIndex:
    """Objects by kind and uuid, with name and reference indexes and sorted-list caches."""

    __slots__ = (
        "_group_nodes", "_macs", "_names", "_net_refs", "_node_refs", "_stale", "list_cache",
        "maps",
    )  # fmt: skip

    # The indexes (each kept in the slot of its name with a leading underscore), built
    # when first read after a bulk store.
    names: _Built[dict[Kind, dict[str, str]]] = _Built("names")  # kind -> name -> uuid
    node_refs: _Built[dict[str, set[str]]] = _Built("refs")  # node -> instances on it
    group_nodes: _Built[dict[str, set[str]]] = _Built("refs")  # node group -> its nodes
    net_refs: _Built[dict[str, set[str]]] = _Built("refs")  # network -> instances on it
    macs: _Built[dict[str, str]] = _Built("refs")  # NIC MAC -> its instance

    def __init__(self) -> None:
        self.maps: dict[Kind, dict[str, Any]] = {kind: {} for kind in MAP_KINDS}
        self._names: dict[Kind, dict[str, str]] = {
            kind: {} for kind in NAMED_KINDS if kind != "cluster"
        }
        self._node_refs: dict[str, set[str]] = {}
        self._group_nodes: dict[str, set[str]] = {}
        self._net_refs: dict[str, set[str]] = {}
        self._macs: dict[str, str] = {}
        self.list_cache: dict[Kind, tuple[ConfigObject, ...]] = {}
        self._stale: set[str] = set()  # the groups not built yet (stored in bulk)

    @classmethod
    def of(cls, maps: dict[Kind, dict[str, Any]]) -> ObjectIndex:
        """The objects of `maps` (kind -> uuid -> object; copied), trusted to be a valid
        configuration: no checks, and the indexes built when first read."""
        idx = cls()
        for kind, objects in maps.items():
            idx.maps[kind] = dict(objects)
        idx._stale = {"names", "refs"}
        return idx

    def _build(self, group: str) -> None:
        """Index every stored object in `group`'s indexes (empty while it is stale)."""
        self._stale.discard(group)
        if group == "names":
            for kind, names in self._names.items():
                names.update((obj.name, obj.uuid) for obj in self.maps[kind].values())
            return
        for node in self.maps["node"].values():
            self._index_refs(node)
        self._ref_instances(self.maps["instance"].values())

    def lookup(self, kind: Kind, key: str) -> Any:
        """Object of a map kind by uuid, then by name; None if neither."""
        objects = self.maps[kind]
        obj = objects.get(key)
        if obj is None and kind in self._names:
            uuid = self.names[kind].get(key)
            if uuid is not None:
                obj = objects[uuid]
        return obj

    def put(self, kind: Kind, obj: MapObject) -> None:
        """Store an object and update every index (replacing the old version)."""
        objects = self.maps[kind]
        if len(self._stale) < 2:  # some index is kept up to date
            old = objects.get(obj.uuid)
            if old is not None:
                self._unindex(kind, old)
            self._index(kind, obj)
        objects[obj.uuid] = obj
        self.list_cache.pop(kind, None)

    def remove(self, kind: Kind, uuid: str) -> None:
        """Drop an object and its index entries."""
        old = self.maps[kind].pop(uuid)
        self._unindex(kind, old)
        self.list_cache.pop(kind, None)

    def _index(self, kind: Kind, obj: Any) -> None:
        """Add an object's entries to the built name and reference indexes."""
        if kind in self._names and "names" not in self._stale:
            self._names[kind][obj.name] = obj.uuid
        if "refs" not in self._stale:
            self._index_refs(obj)

    def _index_refs(self, obj: Any) -> None:
        """Add an object's entries to the reference indexes."""
        if isinstance(obj, Node):
            self._group_nodes.setdefault(obj.group, set()).add(obj.uuid)
        elif isinstance(obj, Instance):
            self._ref_instances((obj,))

    def _ref_instances(self, instances: Iterable[Instance]) -> None:
        """Add instances' entries to the reference indexes, in one loop (a restart indexes
        100,000 at once)."""
        macs, node_refs, net_refs = self._macs, self._node_refs, self._net_refs
        for inst in instances:
            uuid = inst.uuid
            for node in (inst.primary_node, *inst.secondary_nodes):
                refs = node_refs.get(node)
                if refs is None:
                    node_refs[node] = {uuid}
                else:
                    refs.add(uuid)
            for nic in inst.nics:
                macs[nic.mac] = uuid
                if nic.network is not None:
                    net_refs.setdefault(nic.network, set()).add(uuid)

    def _unindex(self, kind: Kind, obj: Any) -> None:
        """Remove an object's entries from the built name and reference indexes."""
        if kind in self._names and "names" not in self._stale:
            self._names[kind].pop(obj.name, None)
        if "refs" in self._stale:
            return
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
