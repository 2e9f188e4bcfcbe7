"""Change records of the configuration: what the journal stores, what `apply` replays.

A record is the complete outcome of one write (the new object, or the uuid removed, plus
the config's new serial_no and mtime), so applying it needs no validation and gives the same
state live and on replay.  Records are tagged msgspec Structs ("t" field), one class per
kind for puts because the object types share no tag of their own.
"""

from __future__ import annotations

from typing import Final, TypeAlias

import msgspec

from .objects import (
    Budget,
    Cluster,
    ConfigObject,
    Drain,
    Filter,
    Instance,
    Kind,
    Network,
    Node,
    NodeGroup,
)


class _Record(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="t", kw_only=True):
    """Common fields: the config's serial_no and mtime after this change."""

    serial_no: int
    mtime: float


class PutCluster(_Record, tag="put_cluster", frozen=True, kw_only=True):
    """The cluster object after an update."""

    obj: Cluster


class PutNodeGroup(_Record, tag="put_nodegroup", frozen=True, kw_only=True):
    """A node group added or updated (renames included)."""

    obj: NodeGroup


class PutNode(_Record, tag="put_node", frozen=True, kw_only=True):
    """A node added or updated."""

    obj: Node


class PutInstance(_Record, tag="put_instance", frozen=True, kw_only=True):
    """An instance added or updated."""

    obj: Instance


class PutNetwork(_Record, tag="put_network", frozen=True, kw_only=True):
    """A network added or updated."""

    obj: Network


class PutFilter(_Record, tag="put_filter", frozen=True, kw_only=True):
    """A filter added or updated."""

    obj: Filter


class PutDrain(_Record, tag="put_drain", frozen=True, kw_only=True):
    """A drain added or updated."""

    obj: Drain


class PutBudget(_Record, tag="put_budget", frozen=True, kw_only=True):
    """A disruption budget added or replaced."""

    obj: Budget


class RemoveObject(_Record, tag="remove", frozen=True, kw_only=True):
    """An object of a map kind removed, by uuid."""

    kind: Kind
    uuid: str


PutRecord: TypeAlias = (
    PutCluster
    | PutNodeGroup
    | PutNode
    | PutInstance
    | PutNetwork
    | PutFilter
    | PutDrain
    | PutBudget
)
ConfigChange: TypeAlias = PutRecord | RemoveObject

PUT_RECORD: Final[dict[Kind, type[PutRecord]]] = {
    "cluster": PutCluster,
    "nodegroup": PutNodeGroup,
    "node": PutNode,
    "instance": PutInstance,
    "network": PutNetwork,
    "filter": PutFilter,
    "drain": PutDrain,
    "budget": PutBudget,
}
RECORD_KIND: Final[dict[type[PutRecord], Kind]] = {cls: kind for kind, cls in PUT_RECORD.items()}


def put_record(kind: Kind, obj: ConfigObject, serial_no: int, mtime: float) -> PutRecord:
    """The put record of `kind` carrying `obj`."""
    return PUT_RECORD[kind](serial_no=serial_no, mtime=mtime, obj=obj)  # type: ignore[arg-type]
