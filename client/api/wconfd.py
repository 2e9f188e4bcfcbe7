"""The wconfd API: declared once, served by wconfd, called by the stubs."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal

import msgspec
from msgspec import Meta

from client import audit
from client.api.common import AuditActor, DaemonApi, RoleInfo
from client.api.declare import rpc
from client.api.numbers import Count, JobId, Priority, Seconds
from client.errors import (
    AlreadyExists,
    ConfigValidationError,
    DeadlockError,
    FilterError,
    IdentityMismatch,
    InvalidParams,
    LockNotHeld,
    LockOrderError,
    NotFound,
    PendingRequestError,
    ReservationError,
    StaleObjectError,
    StorageError,
)
from client.vocabulary import Mode, RequestMode

# A lock request: [[lock, mode], ...] with lock "<level>/<name>"
# (docs/contracts.md#lock-names-and-order).
LockRequest = list[tuple[str, RequestMode]]
# Arrays in results, of a fixed length.  Declared as Sequence: a stub decodes every JSON
# array as a list, while the daemon may build them from tuples.
LockPair = Annotated[Sequence[str], Meta(min_length=2, max_length=2)]
"""[lock, mode] in a result."""
ReservationPair = Annotated[Sequence[str], Meta(min_length=2, max_length=2)]
"""[namespace, value] of one client's reservation."""
Reservation = Annotated[Sequence[str], Meta(min_length=3, max_length=3)]
"""[client_id, namespace, value]."""
Kind = Literal["cluster", "nodegroup", "node", "instance", "network", "filter", "drain", "budget"]


_OBJECT_WRITE_ERRORS = (
    AlreadyExists, ConfigValidationError, FilterError, LockNotHeld, InvalidParams, StorageError,
)  # fmt: skip
"""What adding or replacing a configuration object may raise."""


def object_target(params: Any) -> str:
    """An object write's audit target as the call names it: its lock name from the kind
    and the name (else uuid) given; wconfd names it from the stored object once planned."""
    key = getattr(params, "key", None)
    if key is None:
        obj = params.object
        key = obj.get("name") or obj.get("uuid") or "?"
    return audit.object_target(params.kind, str(key))


class Identity(msgspec.Struct, frozen=True):
    """What `identify` answers: the stable id locks and reservations belong to."""

    client_id: str


class NodeRoom(msgspec.Struct, frozen=True):
    """One node's room (docs/capacity.md#the-model), as `get_node_rooms` answers it: its
    capacity, what its running primary instances use of it, and whether placement may pick
    it."""

    uuid: str
    name: str
    mtotal: int  # MiB for instances
    ctotal: int  # physical CPUs
    vcpu_ratio: float  # the cluster policy's: the node may run ctotal x this many vCPUs
    mused: int  # MiB used by its running primary instances
    cused: int  # their virtual CPUs
    eligible: bool  # online, not drained, vm_capable


class WaitResult(msgspec.Struct, frozen=True):
    """What `update_locks_waiting` answers: granted, or the blockers at the timeout."""

    granted: bool
    blockers: list[str]


class LockOwner(msgspec.Struct, frozen=True):
    """One owner of a lock and its mode."""

    client_id: str
    mode: Mode


class LockInfo(msgspec.Struct, frozen=True):
    """A held lock and everyone holding it."""

    name: str
    owners: list[LockOwner]


class PendingInfo(msgspec.Struct, frozen=True):
    """A waiting request: who, how urgent, what, since when (epoch seconds)."""

    client_id: str
    priority: int
    request: Sequence[LockPair]
    since: float


class AllLocks(msgspec.Struct, frozen=True):
    """Every held lock and every waiting request."""

    locks: list[LockInfo]
    pending: list[PendingInfo]


class ClientInfo(msgspec.Struct, frozen=True):
    """An identified client: who it is and what it holds, waits for and has reserved."""

    client_id: str
    job_id: int | None
    name: str | None
    pid: int
    start_time: float
    locks: Sequence[LockPair]
    reservations: Sequence[ReservationPair]
    connections: int
    pending: PendingInfo | None


class LockHolder(msgspec.Struct, frozen=True):
    """One holder in the way of a waiting lock request: its client id, its job (null for
    a client that is no job), the mode it holds and since when (epoch seconds: the grant
    of that mode, or wconfd's start for locks held across a restart)."""

    owner: str
    job_id: int | None
    mode: Mode
    since: float


class LockWait(msgspec.Struct, frozen=True):
    """One blocked lock of a waiting request (docs/contracts.md#why-a-job-waits): who
    waits (client id, job), for which lock, in which mode, since when, and who holds it."""

    owner: str
    job_id: int | None
    lock: str
    mode: Mode
    since: float
    held_by: list[LockHolder]


class UpdateResult(msgspec.Struct, frozen=True):
    """What `update_object` answers."""

    serial_no: int
    mtime: float


class WConfdApi(DaemonApi):
    """Configuration, locks and reservations."""

    # -- identification (docs/contracts.md#client-identification) ----------------------

    @rpc(IdentityMismatch, InvalidParams, identified=False, daemons_only="job_id")
    def identify(
        self, job_id: JobId | None, pid: int, start_time: float, name: str | None = None
    ) -> Identity:
        """Say who this connection is: a job id or a name, the pid and its start time.

        Must come first on every connection.  The daemon checks the pid against the
        socket peer and the start time against its own reading (within 1 s).
        """

    # -- locks (docs/contracts.md#locks) -----------------------------------------------

    @rpc(
        LockOrderError,
        PendingRequestError,
        InvalidParams,
        StorageError,
        reissue=True,
        daemons_only=True,
    )
    def try_update_locks(self, request: LockRequest) -> list[str]:
        """Apply every [lock, mode] pair atomically, or change nothing and name the blockers.

        Returns [] when applied, else the sorted ids of the clients in the way.
        """

    @rpc(
        LockOrderError,
        PendingRequestError,
        DeadlockError,
        InvalidParams,
        StorageError,
        reissue=True,
        daemons_only=True,
    )
    def update_locks_waiting(
        self, request: LockRequest, priority: Priority = 0, timeout: Seconds | None = None
    ) -> WaitResult:
        """Like try_update_locks, but wait in the daemon until granted or `timeout` passes.

        `timeout` null waits forever, 0 behaves as try_update_locks.  On timeout the
        request is withdrawn and nothing changed; closing the connection withdraws it too.
        """

    @rpc(LockOrderError, PendingRequestError, InvalidParams, StorageError, daemons_only=True)
    def opportunistic_lock_union(
        self, request: LockRequest, timeout: Seconds = 0, min_count: Count = 0
    ) -> list[str]:
        """Acquire as many of the requested locks as possible; the ones now held as asked.

        With `timeout` > 0 keeps waiting for the missing ones until all are held or time is
        up.  If fewer than `min_count` can be had, acquires none and returns [].
        """

    @rpc(reissue=True)
    def list_locks(self) -> list[LockPair]:
        """The caller's locks, in lock order."""

    @rpc(InvalidParams, StorageError, reissue=True, daemons_only=True)
    def intersect_locks(self, locks: list[str]) -> None:
        """Keep only these of the caller's locks (withdraws the caller's waiting request)."""

    @rpc(StorageError, reissue=True, daemons_only=True)
    def free_locks(self) -> None:
        """Release all the caller's locks (withdraws the caller's waiting request)."""

    @rpc(InvalidParams, StorageError, reissue=True, daemons_only=True)
    def free_locks_level(self, level: str) -> None:
        """Release the caller's locks of one level (withdraws its waiting request)."""

    @rpc(InvalidParams, StorageError, reissue=True, daemons_only=True)
    def downgrade_locks_level(self, level: str) -> None:
        """Turn the caller's exclusive locks of one level shared (withdraws its waiting request)."""

    @rpc(reissue=True)
    def list_all_locks(self) -> AllLocks:
        """Every held lock with its owners, and every waiting request."""

    @rpc(reissue=True)
    def lock_waits(self) -> list[LockWait]:
        """Every blocked lock of every waiting request, with the holders in its way: one
        entry per lock a waiting request wants that someone holds in a conflicting mode
        (a lock held back only by an earlier waiting request gives none).  What luxid's
        why_job follows from a job to the jobs that hold it."""

    @rpc(reissue=True)
    def wait_locks_change(self, since_serial: int, timeout: Seconds) -> int:
        """The lock table's change serial as soon as it is not `since_serial` (a lock was
        taken, changed or released, or a request began or stopped waiting), or the current
        one at the timeout; `timeout` 0 reads it.  Event-driven, for watchers."""

    @rpc(reissue=True)
    def list_clients(self) -> list[ClientInfo]:
        """Every known client with its locks, reservations, connections and waiting request."""

    @rpc(daemons_only=True, audit="clients")
    def cleanup_dead_clients(self, actor: AuditActor = None) -> list[str]:
        """Run the death check now; the ids of the clients released."""

    # -- configuration (docs/contracts.md#configuration) ------------------------------

    @rpc(reissue=True)
    def get_config(self) -> Any:
        """The whole configuration document."""

    @rpc(NotFound, InvalidParams, reissue=True)
    def get_object(self, kind: Kind, key: str | None = None) -> Any:
        """One object by uuid or name (the key is ignored for the cluster)."""

    @rpc(InvalidParams, reissue=True)
    def list_objects(self, kind: Kind) -> list[Any]:
        """Every object of a kind."""

    @rpc(NotFound, InvalidParams, reissue=True)
    def get_node_rooms(self, nodes: list[str] | None = None) -> list[NodeRoom]:
        """The room of each node named (uuid or name; NotFound for one that does not
        exist), or of every node, by name: computed from the instances that are up, so
        an opcode checks one node without reading every instance."""

    @rpc(*_OBJECT_WRITE_ERRORS, daemons_only=True, audit=object_target)
    def add_object(self, kind: Kind, object: dict[str, Any], actor: AuditActor = None) -> Any:
        """Add an object (uuid generated if absent); returns it as stored."""

    @rpc(StaleObjectError, NotFound, *_OBJECT_WRITE_ERRORS, daemons_only=True, audit=object_target)
    def update_object(
        self, kind: Kind, object: dict[str, Any], actor: AuditActor = None
    ) -> UpdateResult:
        """Replace an object whose serial_no is the stored one (an identical retry counts as applied)."""

    @rpc(
        NotFound,
        ConfigValidationError,
        LockNotHeld,
        InvalidParams,
        StorageError,
        daemons_only=True,
        audit=object_target,
    )
    def remove_object(self, kind: Kind, key: str, actor: AuditActor = None) -> None:
        """Remove an object; refuses to leave dangling references."""

    @rpc(reissue=True)
    def wait_config_change(self, since_serial: int, timeout: Seconds) -> int:
        """The config serial_no as soon as it exceeds `since_serial`, or the current one at the timeout."""

    # -- reservations (docs/contracts.md#temporary-reservations) ----------------------

    @rpc(ReservationError, InvalidParams, StorageError, daemons_only=True)
    def reserve(self, namespace: str, value: str) -> None:
        """Reserve a value in a namespace for the caller (e.g. a MAC)."""

    @rpc(StorageError, reissue=True, daemons_only=True)
    def release_reservation(self, namespace: str, value: str) -> None:
        """Drop one of the caller's reservations."""

    @rpc(StorageError, reissue=True, daemons_only=True)
    def release_reservations(self, namespace: str | None = None) -> None:
        """Drop the caller's reservations (of one namespace, or all)."""

    @rpc(ReservationError, StorageError, daemons_only=True)
    def generate_mac(self) -> str:
        """A free MAC with the cluster's prefix, reserved for the caller in namespace `mac`."""

    @rpc(reissue=True)
    def list_reservations(self) -> list[Reservation]:
        """Every reservation as [client_id, namespace, value]."""

    # -- roles (docs/contracts.md#replicated-control-plane) ---------------------------

    @rpc(reissue=True)
    def list_roles(self) -> list[RoleInfo]:
        """Every control-plane node that is up and its role, the master first (its
        presence keys and the leader key in etcd; one entry on local files)."""

    @rpc(InvalidParams, daemons_only=True, audit="node/<this node>")
    def step_down(self, wait: Seconds = 5.0, actor: AuditActor = None) -> RoleInfo:
        """`lw cluster failover`: the master gives up its lease (a standby takes over) and
        waits up to `wait` s to see the new master, or until this node wins again after
        its pause of one lease TTL (then no standby is up); answers this node's role after.
        InvalidParams on local files, where no other node can take over."""
