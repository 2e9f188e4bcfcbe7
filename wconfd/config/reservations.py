"""Temporary reservations (docs/contracts.md#temporary-reservations) as a pure table:
(namespace, value) -> owner.

Same two-step shape as the config: `reserve`, `release_*`, `remove_owner`, `generate_mac`
validate and return a change record (None when nothing changes) without touching the
table; `apply(record)` changes it, live after persisting and on journal replay.  A value
is reserved by at most one owner, globally.  In namespace "mac" values are MACs
(normalised to lower case) and may not be ones the config already uses.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Final, Protocol, TypeAlias

import msgspec

from client.errors import InvalidParams, ReservationError

from .validation import normalize_mac

MAC_NAMESPACE: Final = "mac"
MAC_TRIES: Final = 64  # as Ganeti's generateMAC


class _Rec(msgspec.Struct, frozen=True, forbid_unknown_fields=True, tag_field="t"):
    """Common options of the reservation change records."""


class Reserve(_Rec, tag="reserve", frozen=True):
    """`owner` reserves `value` in `namespace`."""

    owner: str
    namespace: str
    value: str


class Release(_Rec, tag="release", frozen=True):
    """`owner` releases one reservation."""

    owner: str
    namespace: str
    value: str


class ReleaseAll(_Rec, tag="release_all", frozen=True):
    """`owner` releases all its reservations in `namespace` (None: every namespace)."""

    owner: str
    namespace: str | None = None


ReservationChange: TypeAlias = Reserve | Release | ReleaseAll


class ReservationSnapshot(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The durable form of the table: sorted [owner, namespace, value] triples."""

    entries: list[tuple[str, str, str]] = []


class RandomBits(Protocol):
    """What generate_mac needs of its random source (random.Random has it)."""

    def getrandbits(self, k: int, /) -> int:
        """k random bits as an int."""
        ...


class ReservationConflict(RuntimeError):
    """A record reserves a value another owner holds: a bug in the caller (two plans made
    against one table) or a journal that does not belong to this snapshot."""


def _check_str(param: str, value: object) -> str:
    """A non-empty string param, else InvalidParams naming it."""
    if not isinstance(value, str) or not value:
        raise InvalidParams(f"{param}: must be a non-empty string", {"param": param})
    return value


def _normalize(namespace: str, value: str) -> str:
    """The stored form of a value: MACs in lower case (InvalidParams if malformed)."""
    if namespace != MAC_NAMESPACE:
        return value
    mac = normalize_mac(value)
    if mac is None:
        raise InvalidParams(f"value: {value!r} is not a MAC address", {"param": "value"})
    return mac


class ReservationTable:
    """Who reserved what; O(1) per reserve/release, O(own reservations) per owner release."""

    __slots__ = ("_by_owner", "_owner_of")

    def __init__(self) -> None:
        """An empty table."""
        self._owner_of: dict[tuple[str, str], str] = {}
        self._by_owner: dict[str, dict[str, set[str]]] = {}

    # ------------------------------------------------------------------- planning

    def reserve(
        self,
        owner: str,
        namespace: str,
        value: str,
        *,
        in_config: Callable[[str], bool] | None = None,
    ) -> Reserve | None:
        """Plan a reservation; None if `owner` already holds it.

        ReservationError if another owner holds it or, for namespace "mac", if
        `in_config(mac)` says the config uses it (pass ConfigState.mac_in_use).
        """
        namespace = _check_str("namespace", namespace)
        value = _normalize(namespace, _check_str("value", value))
        holder = self._owner_of.get((namespace, value))
        if holder == owner:
            return None
        if holder is not None:
            raise ReservationError(
                f"{namespace} {value!r} is already reserved by {holder}",
                {"namespace": namespace, "value": value, "owner": holder},
            )
        if namespace == MAC_NAMESPACE and in_config is not None and in_config(value):
            raise ReservationError(
                f"mac {value!r} is already used in the configuration",
                {"namespace": namespace, "value": value},
            )
        return Reserve(owner=owner, namespace=namespace, value=value)

    def release_reservation(self, owner: str, namespace: str, value: str) -> Release | None:
        """Plan releasing one of `owner`'s reservations; None if it does not hold it."""
        namespace = _check_str("namespace", namespace)
        value = _normalize(namespace, _check_str("value", value))
        if self._owner_of.get((namespace, value)) != owner:
            return None
        return Release(owner=owner, namespace=namespace, value=value)

    def release_reservations(self, owner: str, namespace: str | None = None) -> ReleaseAll | None:
        """Plan releasing `owner`'s reservations in `namespace` (None: all); None if none."""
        if namespace is not None:
            namespace = _check_str("namespace", namespace)
        held = self._by_owner.get(owner)
        if not held or (namespace is not None and namespace not in held):
            return None
        return ReleaseAll(owner=owner, namespace=namespace)

    def remove_owner(self, owner: str) -> ReleaseAll | None:
        """Plan dropping everything `owner` holds (it died); None if it holds nothing."""
        return self.release_reservations(owner, None)

    def generate_mac(
        self,
        owner: str,
        prefix: str,
        rng: RandomBits | None = None,
        *,
        in_config: Callable[[str], bool] | None = None,
        tries: int = MAC_TRIES,
    ) -> tuple[str, Reserve]:
        """A free MAC `prefix:xx:xx:xx` and the record reserving it for `owner`.

        Unique against the config (`in_config`) and every reservation; after `tries`
        collisions ReservationError.  `rng` defaults to a SystemRandom.
        """
        source: RandomBits = rng if rng is not None else random.SystemRandom()
        prefix = prefix.lower()
        for _ in range(tries):
            bits = source.getrandbits(24)
            mac = f"{prefix}:{bits >> 16:02x}:{(bits >> 8) & 0xFF:02x}:{bits & 0xFF:02x}"
            if (MAC_NAMESPACE, mac) in self._owner_of:
                continue
            if in_config is not None and in_config(mac):
                continue
            return mac, Reserve(owner=owner, namespace=MAC_NAMESPACE, value=mac)
        raise ReservationError(
            f"no free MAC with prefix {prefix} after {tries} tries", {"namespace": MAC_NAMESPACE}
        )

    # --------------------------------------------------------------------- change

    def apply(self, record: ReservationChange) -> None:
        """Apply a change record (live after persisting, and journal replay)."""
        if isinstance(record, Reserve):
            key = (record.namespace, record.value)
            holder = self._owner_of.get(key)
            if holder is not None and holder != record.owner:
                raise ReservationConflict(
                    f"{record.namespace} {record.value!r} is reserved by {holder}, "
                    f"not {record.owner}"
                )
            self._owner_of[key] = record.owner
            self._by_owner.setdefault(record.owner, {}).setdefault(record.namespace, set()).add(
                record.value
            )
        elif isinstance(record, Release):
            key = (record.namespace, record.value)
            if self._owner_of.get(key) == record.owner:
                del self._owner_of[key]
                self._drop(record.owner, record.namespace, record.value)
        else:
            held = self._by_owner.get(record.owner, {})
            namespaces = list(held) if record.namespace is None else [record.namespace]
            for namespace in namespaces:
                for value in list(held.get(namespace, ())):
                    del self._owner_of[(namespace, value)]
                    self._drop(record.owner, namespace, value)

    def _drop(self, owner: str, namespace: str, value: str) -> None:
        """Remove one value from the per-owner index, pruning empty levels."""
        held = self._by_owner[owner]
        values = held[namespace]
        values.discard(value)
        if not values:
            del held[namespace]
            if not held:
                del self._by_owner[owner]

    # ---------------------------------------------------------------------- reads

    def owner_of(self, namespace: str, value: str) -> str | None:
        """Who reserved `value` in `namespace`, or None."""
        return self._owner_of.get((namespace, _normalize(namespace, value)))

    def owners(self) -> list[str]:
        """Every owner holding at least one reservation, sorted."""
        return sorted(self._by_owner)

    def count(self, owner: str) -> int:
        """How many reservations `owner` holds."""
        return sum(len(v) for v in self._by_owner.get(owner, {}).values())

    def list_reservations(self, owner: str | None = None) -> list[list[str]]:
        """[[client_id, namespace, value]] sorted; only `owner`'s if given."""
        if owner is None:
            rows = [[o, ns, v] for (ns, v), o in self._owner_of.items()]
        else:
            rows = [[owner, ns, v] for ns, vs in self._by_owner.get(owner, {}).items() for v in vs]
        rows.sort()
        return rows

    def snapshot(self) -> ReservationSnapshot:
        """The durable form of the table."""
        return ReservationSnapshot(entries=[(o, ns, v) for o, ns, v in self.list_reservations()])

    @classmethod
    def from_snapshot(cls, snapshot: ReservationSnapshot) -> ReservationTable:
        """Rebuild a table from its durable form (ReservationConflict on duplicates)."""
        table = cls()
        for owner, namespace, value in snapshot.entries:
            table.apply(Reserve(owner=owner, namespace=namespace, value=value))
        return table

    def __eq__(self, other: object) -> bool:
        """Tables are equal when they hold the same reservations."""
        if not isinstance(other, ReservationTable):
            return NotImplemented
        return self._owner_of == other._owner_of

    __hash__ = None  # type: ignore[assignment]
