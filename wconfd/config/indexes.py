"""The stored objects of the configuration and the indexes over them
(docs/contracts.md#configuration-document).

One dict per kind (uuid -> object), a name -> uuid index per named kind, and
reverse-reference indexes (instances per node and per network, nodes per group, MAC ->
instance), so finding an object or its users never walks the config.  Pure data; the
ConfigState (state.py) decides what to store.
"""

from __future__ import annotations

from typing import Any

from .objects import MAP_KINDS, NAMED_KINDS, ConfigObject, Instance, Kind, MapObject, Node


class ObjectIndex:
    """Objects by kind and uuid, with name and reference indexes and sorted-list caches."""

    __slots__ = ("group_nodes", "list_cache", "macs", "maps", "names", "net_refs", "node_refs")

    def __init__(self) -> None:
        self.maps: dict[Kind, dict[str, Any]] = {kind: {} for kind in MAP_KINDS}
        self.names: dict[Kind, dict[str, str]] = {
            kind: {} for kind in NAMED_KINDS if kind != "cluster"
        }
        self.node_refs: dict[str, set[str]] = {}
        self.group_nodes: dict[str, set[str]] = {}
        self.net_refs: dict[str, set[str]] = {}
        self.macs: dict[str, str] = {}
        self.list_cache: dict[Kind, tuple[ConfigObject, ...]] = {}

    def lookup(self, kind: Kind, key: str) -> Any:
        """Object of a map kind by uuid, then by name; None if neither."""
        objects = self.maps[kind]
        obj = objects.get(key)
        if obj is None and kind in self.names:
            uuid = self.names[kind].get(key)
            if uuid is not None:
                obj = objects[uuid]
        return obj

    def put(self, kind: Kind, obj: MapObject) -> None:
        """Store an object and update every index (replacing the old version)."""
        objects = self.maps[kind]
        old = objects.get(obj.uuid)
        if old is not None:
            self._unindex(kind, old)
        objects[obj.uuid] = obj
        self._index(kind, obj)
        self.list_cache.pop(kind, None)

    def remove(self, kind: Kind, uuid: str) -> None:
        """Drop an object and its index entries."""
        old = self.maps[kind].pop(uuid)
        self._unindex(kind, old)
        self.list_cache.pop(kind, None)

    def _index(self, kind: Kind, obj: Any) -> None:
        """Add an object's entries to the name and reference indexes."""
        if kind in self.names:
            self.names[kind][obj.name] = obj.uuid
        if isinstance(obj, Node):
            self.group_nodes.setdefault(obj.group, set()).add(obj.uuid)
        elif isinstance(obj, Instance):
            for node in (obj.primary_node, *obj.secondary_nodes):
                self.node_refs.setdefault(node, set()).add(obj.uuid)
            for nic in obj.nics:
                self.macs[nic.mac] = obj.uuid
                if nic.network is not None:
                    self.net_refs.setdefault(nic.network, set()).add(obj.uuid)

    def _unindex(self, kind: Kind, obj: Any) -> None:
        """Remove an object's entries from the name and reference indexes."""
        if kind in self.names:
            self.names[kind].pop(obj.name, None)
        if isinstance(obj, Node):
            _discard(self.group_nodes, obj.group, obj.uuid)
        elif isinstance(obj, Instance):
            for node in (obj.primary_node, *obj.secondary_nodes):
                _discard(self.node_refs, node, obj.uuid)
            for nic in obj.nics:
                if self.macs.get(nic.mac) == obj.uuid:
                    del self.macs[nic.mac]
                if nic.network is not None:
                    _discard(self.net_refs, nic.network, obj.uuid)


def _discard(index: dict[str, set[str]], key: str, value: str) -> None:
    """Remove `value` from the set at `key`, dropping the set when it empties."""
    members = index.get(key)
    if members is not None:
        members.discard(value)
        if not members:
            del index[key]
