"""What an opcode may do while it runs: the execution-context Protocol.

The job process provides an object satisfying `OpContext`
(jobproc.daemon_context.DaemonOpContext, over the daemons' stubs); tests provide an
in-memory fake.  Opcodes see the data plane only through it, so they run without daemons.

Configuration objects are plain dicts in the JSON shape of
docs/contracts.md#configuration-document (node references are uuids).  The methods mirror
wconfd's and raise the same `client.errors` classes (`NotFound`, `AlreadyExists`,
`ConfigValidationError`, `StaleObjectError`, `LockNotHeld`, `ReservationError`); a job
process wrapping a stub that returns msgspec Structs converts them with
`msgspec.to_builtins`.  All calls are synchronous: one job, one thread.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

from client.capacity import Room
from jobproc.opcodes.errors import Canceled, OpExecError

__all__ = ["Canceled", "ConfigReader", "ConfigWriter", "OpContext", "OpExecError"]

ConfigObject = dict[str, Any]


@runtime_checkable
class ConfigReader(Protocol):
    """Read access to the configuration: what ``locks(params, config)`` receives."""

    def get_object(self, kind: str, key: str) -> ConfigObject:
        """The object of `kind` whose uuid or name is `key` (`cluster`: key ignored).

        Raises client.errors.NotFound.
        """
        ...

    def list_objects(self, kind: str) -> list[ConfigObject]:
        """All objects of `kind`."""
        ...

    def node_rooms(self, nodes: Sequence[str] | None = None) -> dict[str, Room]:
        """The room (docs/contracts.md#room-on-nodes) of each of `nodes` (uuids or names),
        or of every node, by node uuid; wconfd sums it from the node's own instances.

        Raises client.errors.NotFound.
        """
        ...


@runtime_checkable
class ConfigWriter(ConfigReader, Protocol):
    """Configuration writes and reservations; writes need the locks
    (docs/contracts.md#lock-enforcement)."""

    def add_object(self, kind: str, obj: Mapping[str, Any]) -> ConfigObject:
        """Add an object (uuid generated if absent); returns it as stored."""
        ...

    def update_object(self, kind: str, obj: Mapping[str, Any]) -> Mapping[str, Any]:
        """Replace an object; `obj["serial_no"]` must be the stored one.

        Returns ``{"serial_no", "mtime"}``.
        """
        ...

    def remove_object(self, kind: str, key: str) -> None:
        """Remove an object; refuses to leave dangling references."""
        ...

    def generate_mac(self) -> str:
        """A free MAC with the cluster's prefix, reserved for this job (namespace mac)."""
        ...

    def reserve(self, namespace: str, value: str) -> None:
        """Reserve `value` in `namespace` for this job; ReservationError if taken."""
        ...


@runtime_checkable
class OpContext(ConfigWriter, Protocol):
    """Everything `OpCode.execute` gets: config, log, interruptible sleep, job submission."""

    @property
    def job_id(self) -> int:
        """The id of the running job."""
        ...

    @property
    def priority(self) -> int:
        """The opcode's current priority (-20 … 19), after any lock-wait escalation."""
        ...

    def log(self, message: str, type: str = "message") -> None:
        """Append an entry to the opcode's log (``oplog``), as Ganeti's Feedback."""
        ...

    def sleep(self, seconds: float) -> None:
        """Wait `seconds`; raises `Canceled` at once when the job is canceled."""
        ...

    def submit_jobs(self, jobs: list[list[dict[str, Any]]]) -> list[int]:
        """Submit jobs (each a list of opcode dicts) to luxid; returns their ids.

        Raises `OpExecError` naming the refused jobs if luxid refuses any (the rest stay
        submitted), as a job cannot do anything better than report it.
        """
        ...
