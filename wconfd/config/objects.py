"""The configuration document (docs/contracts.md#configuration-document) as msgspec Structs.

Every object is a frozen Struct that forbids unknown fields, so one decoded object can be
shared by the live state, the change record and the reply without copying.  Sequences are
tuples (they encode as JSON arrays) so nothing shared can be mutated in place.

Choices for what docs/contracts.md leaves open (documented here because clients see them):

- `uuid` defaults to "" meaning "generate one" (add only); `serial_no`, `ctime`, `mtime`
  default to 0 and are always overwritten by the daemon.
- node: `group` defaults to "" = the group named "default" (or the only group);
  `primary_ip` None; `offline`/`drained`/`master_candidate` False; `vm_capable` True;
  capacity (docs/contracts.md#room-on-nodes) `mtotal` 65536 MiB and `ctotal` 32 CPUs.
- cluster: `ipolicy` is Ganeti 3.0's default instance policy with "sharedfile" first in
  its disk templates (`vcpu-ratio` 4.0: a node runs up to 4 * `ctotal` virtual CPUs); its
  field names are Ganeti's, with hyphens, as htools read them.
- instance: `memory` 128 MiB and `vcpus` 1 (Ganeti's defaults); `admin_state` "down";
  disk `mode` "rw" ("rw" | "ro"), disk `size` in MiB (required); nic `mac` required,
  `ip` and `network` None.
- network: `network` (CIDR) required, `gateway` None.
- filter: `priority` 0, `watermark` 0, `predicates` [], `action` "ACCEPT",
  `reason_trail` []; `action` is a string or ["RATE_LIMIT", n] (checked semantically).
- drain (docs/contracts.md#drains): keyed by its `target` ("node/<name>" or "queue"); `uuid`
  is the target too (filled in when empty) so that the map kinds share one index.  Its type
  is declared once, in `client.drains` (`DrainRecord`, named `Drain` here), for wconfd and
  luxid alike: wconfd checks the record's fields (docs/contracts.md#node-drain) and stores
  luxid's resume state (jobs, moved, blocked, ...) as typed there.
- budget (docs/contracts.md#disruption-budgets): keyed by its `name`, which is its `uuid`
  too; declared in `client.budgets` (`BudgetRecord`); its serial_no is `serial` on the wire.
- References may be given as a name on input; they are stored as uuids (see validation).
"""

from __future__ import annotations

from typing import Any, Final, Literal, TypeAlias, get_args

import msgspec

from client.budgets import BudgetRecord as Budget
from client.capacity import DEFAULT_CTOTAL, DEFAULT_MTOTAL, DEFAULT_VCPU_RATIO
from client.drains import DrainRecord as Drain
from client.errors import InvalidParams

from .numbers import unstorable_number

Kind: TypeAlias = Literal[
    "cluster", "nodegroup", "node", "instance", "network", "filter", "drain", "budget"
]
KINDS: Final[tuple[Kind, ...]] = get_args(Kind)
# The kinds stored as maps keyed by uuid, with the document field holding each map.
MAP_KINDS: Final[tuple[Kind, ...]] = (
    "nodegroup", "node", "instance", "network", "filter", "drain", "budget"
)  # fmt: skip
DOC_FIELD: Final[dict[Kind, str]] = {
    "nodegroup": "nodegroups",
    "node": "nodes",
    "instance": "instances",
    "network": "networks",
    "filter": "filters",
    "drain": "drains",
    "budget": "budgets",
}
# The kinds whose objects have a unique name (a filter is known by its uuid only).
NAMED_KINDS: Final[tuple[Kind, ...]] = ("cluster", "nodegroup", "node", "instance", "network")

LockEnforcement: TypeAlias = Literal["enforce", "warn"]
AdminState: TypeAlias = Literal["up", "down", "offline"]
DiskMode: TypeAlias = Literal["rw", "ro"]

DEFAULT_CLUSTER_NAME: Final = "lockwarden"
DEFAULT_GROUP_NAME: Final = "default"
DOCUMENT_VERSION: Final = 1


class _Base(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """Common Struct options: immutable, strict about unknown fields, keyword-only."""


class ISpec(_Base, frozen=True, kw_only=True, rename="kebab"):
    """An instance spec of the policy (Ganeti's ispecs parameters): sizes in MiB, counts."""

    memory_size: int = 128
    cpu_count: int = 1
    disk_count: int = 1
    disk_size: int = 1024
    nic_count: int = 1
    spindle_use: int = 1


class MinMaxISpecs(_Base, frozen=True, kw_only=True):
    """The smallest and the largest instance the policy allows."""

    min: ISpec = ISpec()
    max: ISpec = ISpec(
        memory_size=32768, cpu_count=8, disk_count=16, disk_size=1048576, nic_count=8,
        spindle_use=12,
    )  # fmt: skip


# Ganeti's disk templates; instance disks live on shared storage here
# (docs/contracts.md#room-on-nodes).
DISK_TEMPLATES: Final = (
    "sharedfile", "blockdev", "diskless", "drbd", "ext", "file", "gluster", "plain", "rbd",
)  # fmt: skip


class IPolicy(_Base, frozen=True, kw_only=True, rename="kebab"):
    """The cluster's instance policy, Ganeti 3.0's default (constants.IPOLICY_DEFAULTS)."""

    minmax: tuple[MinMaxISpecs, ...] = (MinMaxISpecs(),)
    std: ISpec = ISpec()
    disk_templates: tuple[str, ...] = DISK_TEMPLATES
    vcpu_ratio: float = DEFAULT_VCPU_RATIO
    spindle_ratio: float = 32.0


class Cluster(_Base, frozen=True, kw_only=True):
    """The single cluster object (key ignored; no add/remove)."""

    uuid: str = ""
    name: str = DEFAULT_CLUSTER_NAME
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0
    max_running_jobs: int = 20
    mac_prefix: str = "aa:00:00"
    lock_enforcement: LockEnforcement = "enforce"
    ipolicy: IPolicy = IPolicy()
    tags: tuple[str, ...] = ()


class NodeGroup(_Base, frozen=True, kw_only=True):
    """A node group; nodes reference it by uuid."""

    uuid: str = ""
    name: str
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0
    tags: tuple[str, ...] = ()


class Node(_Base, frozen=True, kw_only=True):
    """A node; `group` is a nodegroup uuid ("" on input = the default group)."""

    uuid: str = ""
    name: str
    group: str = ""
    primary_ip: str | None = None
    offline: bool = False
    drained: bool = False
    master_candidate: bool = False
    vm_capable: bool = True
    mtotal: int = DEFAULT_MTOTAL
    ctotal: int = DEFAULT_CTOTAL
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0
    tags: tuple[str, ...] = ()


class Disk(_Base, frozen=True, kw_only=True):
    """An instance disk; `size` in MiB, `uuid` generated when empty."""

    uuid: str = ""
    size: int
    mode: DiskMode = "rw"


class Nic(_Base, frozen=True, kw_only=True):
    """An instance NIC; `network` is a network uuid or None."""

    mac: str
    ip: str | None = None
    network: str | None = None


class Instance(_Base, frozen=True, kw_only=True):
    """An instance; node references are node uuids, `memory` in MiB."""

    uuid: str = ""
    name: str
    primary_node: str
    secondary_nodes: tuple[str, ...] = ()
    memory: int = 128
    vcpus: int = 1
    disks: tuple[Disk, ...] = ()
    nics: tuple[Nic, ...] = ()
    admin_state: AdminState = "down"
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0
    tags: tuple[str, ...] = ()


class Network(_Base, frozen=True, kw_only=True):
    """An IP network (CIDR) with an optional gateway inside it."""

    uuid: str = ""
    name: str
    network: str
    gateway: str | None = None
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0
    tags: tuple[str, ...] = ()


class Filter(_Base, frozen=True, kw_only=True):
    """A job filter rule (docs/contracts.md#filters); the config checks its shape, luxid its
    semantics."""

    uuid: str = ""
    priority: int = 0
    watermark: int = 0
    predicates: tuple[Any, ...] = ()
    action: Any = "ACCEPT"
    reason_trail: tuple[Any, ...] = ()
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0


ConfigObject: TypeAlias = Cluster | NodeGroup | Node | Instance | Network | Filter | Drain | Budget
MapObject: TypeAlias = NodeGroup | Node | Instance | Network | Filter | Drain | Budget

KIND_TYPES: Final[dict[Kind, type[ConfigObject]]] = {
    "cluster": Cluster,
    "nodegroup": NodeGroup,
    "node": Node,
    "instance": Instance,
    "network": Network,
    "filter": Filter,
    "drain": Drain,
    "budget": Budget,
}


class ConfigDocument(_Base, frozen=True, kw_only=True):
    """The whole configuration, exactly the shape `get_config` returns."""

    version: int = DOCUMENT_VERSION
    serial_no: int = 0
    ctime: float = 0.0
    mtime: float = 0.0
    cluster: Cluster
    nodegroups: dict[str, NodeGroup] = {}
    nodes: dict[str, Node] = {}
    instances: dict[str, Instance] = {}
    networks: dict[str, Network] = {}
    filters: dict[str, Filter] = {}
    drains: dict[str, Drain] = {}
    budgets: dict[str, Budget] = {}


def check_kind(kind: object) -> Kind:
    """Return `kind` if it is one of the six kinds, else InvalidParams naming `kind`."""
    if isinstance(kind, str) and kind in KIND_TYPES:
        return kind
    raise InvalidParams(
        f"kind: unknown object kind {kind!r}; expected one of {', '.join(KINDS)}",
        {"param": "kind"},
    )


def convert_object(kind: Kind, data: object, param: str = "object") -> ConfigObject:
    """Turn a wire value (a JSON object) into the kind's Struct.

    Type errors of the RPC param itself (not an object, an int outside signed 64 bits,
    wrong field type, unknown field, missing required field, bad enum value)
    raise InvalidParams naming the param and the
    field path; range and reference checks come later and raise ConfigValidationError.
    An already-typed Struct of the right kind is accepted as is.
    """
    cls = KIND_TYPES[kind]
    if isinstance(data, cls):
        return data
    if not isinstance(data, dict):
        raise InvalidParams(
            f"{param}: a {kind} must be a JSON object, got {type(data).__name__}",
            {"param": param},
        )
    problem = unstorable_number(data, param)
    if problem is not None:
        raise InvalidParams(problem, {"param": param})
    try:
        return msgspec.convert(data, type=cls)
    except msgspec.ValidationError as exc:
        raise InvalidParams(f"{param}: invalid {kind}: {exc}", {"param": param}) from None
