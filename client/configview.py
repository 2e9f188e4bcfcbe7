"""One read of the cluster configuration, indexed the way listings need it: names for the
uuids the configuration stores, the instances on each node, and each node's room.

Shared by `lw node|instance …` and the RAPI's node, instance and group resources, which
present the same facts under different field names.  Room (free memory and CPUs) comes
from `client.capacity`, the rule placement uses, so views and placement agree.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from client.capacity import Room, config_rooms

Obj = Mapping[str, Any]


class ConfigView:
    """The configuration document of `get_config`, with lookups by name and by node."""

    def __init__(self, config: Obj) -> None:
        self.config = config
        self.node_names: dict[str, str] = {u: n["name"] for u, n in config.get("nodes", {}).items()}
        self.group_names: dict[str, str] = {
            u: g["name"] for u, g in config.get("nodegroups", {}).items()
        }
        self.rooms: dict[str, Room] = config_rooms(config)
        self._primary: dict[str, list[str]] = {}
        self._secondary: dict[str, list[str]] = {}
        for inst in config.get("instances", {}).values():
            self._primary.setdefault(inst.get("primary_node"), []).append(inst["name"])
            for node in inst.get("secondary_nodes", []):
                self._secondary.setdefault(node, []).append(inst["name"])

    def objects(self, kind: str) -> list[Obj]:
        """The objects of one kind (`nodes`, `instances`), sorted by name."""
        return sorted(self.config.get(kind, {}).values(), key=lambda o: str(o.get("name")))

    def find(self, kind: str, key: str) -> Obj | None:
        """One object of a kind by name or uuid."""
        for obj in self.config.get(kind, {}).values():
            if key in (obj.get("name"), obj.get("uuid")):
                return obj
        return None

    def node_name(self, uuid: str | None) -> str | None:
        """A node's name (the uuid itself if no such node)."""
        return self.node_names.get(uuid, uuid) if uuid is not None else None

    def group_name(self, uuid: str | None) -> str | None:
        """A node group's name (the uuid itself if no such group)."""
        return self.group_names.get(uuid, uuid) if uuid is not None else None

    def primary_instances(self, node: Obj) -> list[str]:
        """Names of the instances whose primary node this is, sorted."""
        return sorted(self._primary.get(node["uuid"], []))

    def secondary_instances(self, node: Obj) -> list[str]:
        """Names of the instances that have this node as a secondary, sorted."""
        return sorted(self._secondary.get(node["uuid"], []))

    def room(self, node: Obj) -> Room:
        """The node's capacity and what its running primary instances use."""
        return self.rooms[node["uuid"]]
