"""wconfd's state as etcd keys (client/_server/etcd/LAYOUT.md): pure code, no I/O.

    P/config/meta                          {"version", "serial_no", "ctime", "mtime", "digest"}
    P/config/cluster                       the cluster object
    P/config/<kind>/<uuid>                 one object of a map kind (nodegroup, node, ...)
    P/locks/<client_id>/<lock>             {"mode", "node"}: one key per held lock
    P/reservations/<client_id>/<ns>/<val>  {"node"}: one key per reservation

Variable components are percent-encoded, so a `/` in a name never makes a level. Every
holding carries the node whose master granted it (LAYOUT.md proposed a separate
`P/clients/<id>` key put with a client's first holding and deleted with its last; keeping
the node in each value needs no such bookkeeping and still tells a new master whose
clients were on another node). A change costs what it changes (docs/contracts.md#lock-rules,
durability before the answer): one put per acquired lock, a range delete for a run of
released ones, one prefix delete when a client lets go of everything.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final
from urllib.parse import quote, unquote

import msgspec

from client._server.etcd.wire import KeyValue, RequestOp, op_delete, op_put, prefix_end
from wconfd.config import ConfigChange
from wconfd.config.objects import ConfigDocument
from wconfd.config.records import RECORD_KIND, RemoveObject
from wconfd.config.reservations import Release, ReleaseAll, ReservationSnapshot, Reserve
from wconfd.locking.names import RELEASE
from wconfd.storage.etcd_digest import ConfigDigest

# Above this many released locks in one change, runs of them go as range deletes.
PER_KEY_DELETES: Final = 32


def _q(part: str) -> str:
    return quote(part, safe="")


class Meta(msgspec.Struct, frozen=True):
    """The top level of the config document besides its objects, and the digest of the
    config keys (wconfd.storage.etcd_digest; "" where none is kept)."""

    serial_no: int
    ctime: float
    mtime: float
    version: int = 1
    digest: str = ""


class Holding(msgspec.Struct, frozen=True):
    """What a lock or reservation key holds: its mode (locks) and the granting node."""

    node: str
    mode: str = ""


class Keys:
    """The key names under one prefix."""

    def __init__(self, prefix: str) -> None:
        self.root = prefix.rstrip("/")
        self.config = f"{self.root}/config/".encode()
        self.meta = self.config + b"meta"
        self.locks = f"{self.root}/locks/".encode()
        self.reservations = f"{self.root}/reservations/".encode()

    def obj(self, kind: str, uuid: str) -> bytes:
        if kind == "cluster":
            return self.config + b"cluster"
        return self.config + f"{_q(kind)}/{_q(uuid)}".encode()

    def owner_locks(self, owner: str) -> bytes:
        return self.locks + f"{_q(owner)}/".encode()

    def lock(self, owner: str, lock: str) -> bytes:
        return self.owner_locks(owner) + _q(lock).encode()

    def owner_reservations(self, owner: str, namespace: str | None = None) -> bytes:
        key = self.reservations + f"{_q(owner)}/".encode()
        return key if namespace is None else key + f"{_q(namespace)}/".encode()

    def reservation(self, owner: str, namespace: str, value: str) -> bytes:
        return self.owner_reservations(owner, namespace) + _q(value).encode()


def config_ops(keys: Keys, record: ConfigChange) -> list[RequestOp]:
    """The operation storing one config change (the meta key goes in the trailer)."""
    if isinstance(record, RemoveObject):
        return [op_delete(keys.obj(record.kind, record.uuid))]
    kind = RECORD_KIND[type(record)]
    return [op_put(keys.obj(kind, record.obj.uuid), msgspec.json.encode(record.obj))]


def reservation_ops(
    keys: Keys, node: str, record: Reserve | Release | ReleaseAll
) -> list[RequestOp]:
    """The operation storing one reservation change."""
    if isinstance(record, Reserve):
        key = keys.reservation(record.owner, record.namespace, record.value)
        return [op_put(key, msgspec.json.encode(Holding(node=node)))]
    if isinstance(record, Release):
        return [op_delete(keys.reservation(record.owner, record.namespace, record.value))]
    return [op_delete(keys.owner_reservations(record.owner, record.namespace), prefix=True)]


def lock_ops(
    keys: Keys, node: str, owner: str, pairs: Iterable[tuple[str, str]], held_before: set[str]
) -> list[RequestOp]:
    """The operations storing one lock change of `owner`, who held `held_before`.

    `held_before` is updated to the holdings after the change."""
    ops: list[RequestOp] = []
    released: set[str] = set()
    for lock, mode in pairs:
        if mode == RELEASE:
            if lock in held_before:
                released.add(lock)
            continue
        released.discard(lock)
        ops.append(op_put(keys.lock(owner, lock), msgspec.json.encode(Holding(node, mode))))
        held_before.add(lock)
    if not released:
        return ops
    remaining = held_before - released
    if not remaining:
        ops.append(op_delete(keys.owner_locks(owner), prefix=True))
    elif len(released) <= PER_KEY_DELETES:
        ops.extend(op_delete(keys.lock(owner, lock)) for lock in sorted(released))
    else:
        ops.extend(_range_deletes(keys, owner, held_before, released))
    held_before -= released
    return ops


def _range_deletes(keys: Keys, owner: str, held: set[str], released: set[str]) -> list[RequestOp]:
    """Range deletes covering exactly the released keys: runs between kept keys."""
    ordered = sorted((keys.lock(owner, lock), lock in released) for lock in held)
    ops: list[RequestOp] = []
    start: bytes | None = None
    for key, gone in ordered:
        if gone and start is None:
            start = key
        elif not gone and start is not None:
            ops.append(op_delete(start, range_end=key))
            start = None
    if start is not None:
        ops.append(op_delete(start, range_end=prefix_end(keys.owner_locks(owner))))
    return ops


class Decoded(msgspec.Struct):
    """What the keys under a prefix hold, as the daemon's snapshot needs it; the digest of
    the config keys read, and whether it is the one meta holds (`checked`: the objects
    are as a master wrote them, wconfd.storage.etcd_digest)."""

    config: ConfigDocument | None
    locks: dict[str, list[tuple[str, str]]]
    reservations: ReservationSnapshot
    nodes: dict[str, str]  # owner -> the node that granted its holdings
    digest: ConfigDigest
    checked: bool = False


def decode_state(keys: Keys, kvs: Iterable[KeyValue]) -> Decoded:
    """Rebuild the state from every key under the prefix (config None if there is none)."""
    meta: Meta | None = None
    parts: list[bytes] = []
    cluster = b""
    maps: dict[str, list[bytes]] = {}
    locks: dict[str, list[tuple[str, str]]] = {}
    entries: list[tuple[str, str, str]] = []
    nodes: dict[str, str] = {}
    digest = ConfigDigest(keys.config)
    for kv in kvs:
        key = kv.key
        if key == keys.meta:
            meta = msgspec.json.decode(kv.value, type=Meta)
        elif key == keys.obj("cluster", ""):
            cluster = kv.value
            digest.add(key, kv.value)
        elif key.startswith(keys.config):
            digest.add(key, kv.value)
            kind, _, uuid = key[len(keys.config) :].decode().partition("/")
            maps.setdefault(unquote(kind), []).append(
                msgspec.json.encode(unquote(uuid)) + b":" + kv.value
            )
        elif key.startswith(keys.locks):
            owner, _, lock = key[len(keys.locks) :].decode().partition("/")
            held = msgspec.json.decode(kv.value, type=Holding)
            locks.setdefault(unquote(owner), []).append((unquote(lock), held.mode))
            nodes[unquote(owner)] = held.node
        elif key.startswith(keys.reservations):
            owner, namespace, value = key[len(keys.reservations) :].decode().split("/")
            held = msgspec.json.decode(kv.value, type=Holding)
            entries.append((unquote(owner), unquote(namespace), unquote(value)))
            nodes[unquote(owner)] = held.node
    config = None
    if meta is not None:
        top = {f: getattr(meta, f) for f in ("version", "serial_no", "ctime", "mtime")}
        parts.append(msgspec.json.encode(top)[:-1] + b',"cluster":' + cluster)
        for kind, objs in maps.items():
            parts.append(b'"' + kind.encode() + b's":{' + b",".join(objs) + b"}")
        config = msgspec.json.decode(b",".join(parts) + b"}", type=ConfigDocument)
    reservations = ReservationSnapshot(entries=sorted(entries))
    checked = meta is not None and meta.digest != "" and meta.digest == digest.hex()
    return Decoded(config, locks, reservations, nodes, digest, checked)


def document_ops(keys: Keys, document: ConfigDocument) -> list[RequestOp]:
    """Puts storing a whole (fresh or imported) config: its meta, cluster and every object.
    The document must have passed the checks: the meta's digest vouches for it."""
    ops = [op_put(keys.obj("cluster", ""), msgspec.json.encode(document.cluster))]
    for kind, objs in (
        ("nodegroup", document.nodegroups),
        ("node", document.nodes),
        ("instance", document.instances),
        ("network", document.networks),
        ("filter", document.filters),
        ("drain", document.drains),
        ("budget", document.budgets),
    ):
        ops.extend(op_put(keys.obj(kind, uuid), msgspec.json.encode(o)) for uuid, o in objs.items())
    digest = ConfigDigest.of_puts(keys.config, ops).hex()
    meta = Meta(document.serial_no, document.ctime, document.mtime, document.version, digest)
    return [op_put(keys.meta, msgspec.json.encode(meta)), *ops]


def meta_op(keys: Keys, meta: Meta) -> RequestOp:
    """The put of the config's top level."""
    return op_put(keys.meta, msgspec.json.encode(meta))
