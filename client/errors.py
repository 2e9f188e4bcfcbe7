"""Typed errors of the wire protocol (docs/contracts.md#errors): one class per `data.type`.

Each class carries its code; the maps used by the client stubs and the server's error
encoding are derived from the classes, so the table of codes is written once.  Raise these
anywhere in a daemon (pure cores included); the server turns them into JSON-RPC error
objects and the stubs turn those back into the same class.
"""

from __future__ import annotations

from typing import Any


class RpcError(Exception):
    """Base of every error a Lockwarden call can raise.

    `code` is the JSON-RPC error code, `message` the human text, `data` the error
    object's data (always a dict whose `type` is the class name).
    """

    code: int = -32603

    def __init__(self, message: str = "", data: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message or self.__doc__ or self.type_name
        extra = dict(data or {})
        extra["type"] = self.type_name
        self.data: dict[str, Any] = extra

    @property
    def type_name(self) -> str:
        """The wire name of this error (`data.type`)."""
        return type(self).__name__

    def __str__(self) -> str:
        return f"{self.type_name}: {self.message}"

    def to_wire(self) -> dict[str, Any]:
        """The JSON-RPC error object for this error."""
        return {"code": self.code, "message": self.message, "data": self.data}


class ParseError(RpcError):
    """The message is not valid JSON or UTF-8."""

    code = -32700


class InvalidRequest(RpcError):
    """Not a JSON-RPC 2.0 request, or the message is too large."""

    code = -32600


class MethodNotFound(RpcError):
    """Unknown method."""

    code = -32601


class InvalidParams(RpcError):
    """Wrong, missing or ill-typed params."""

    code = -32602


class InternalError(RpcError):
    """A bug in the daemon; the daemon log has the traceback."""

    code = -32603


class NotIdentified(RpcError):
    """Call identify first."""

    code = -32000


class IdentityMismatch(RpcError):
    """Identify with a pid or start time that is not the peer's."""

    code = -32001


class PermissionDenied(RpcError):
    """The peer may not call this."""

    code = -32002


class LockOrderError(RpcError):
    """The request violates the lock order."""

    code = -32010


class PendingRequestError(RpcError):
    """The client already has a waiting request."""

    code = -32011


class DeadlockError(RpcError):
    """Waiting would close a cycle in the wait-for graph."""

    code = -32012


class ConfigValidationError(RpcError):
    """An object or the whole config fails validation."""

    code = -32020


class StaleObjectError(RpcError):
    """Update with a serial_no that is not the stored one."""

    code = -32021


class NotFound(RpcError):
    """No such object, job or filter."""

    code = -32022


class AlreadyExists(RpcError):
    """Name or uuid already taken."""

    code = -32023


class LockNotHeld(RpcError):
    """A config write without the lock it needs."""

    code = -32024


class ReservationError(RpcError):
    """Resource already reserved or used."""

    code = -32030


class QueueDrained(RpcError):
    """Submit while the drain flag is set."""

    code = -32040


class InvalidOpcode(RpcError):
    """Unknown OP_ID or bad opcode parameters."""

    code = -32041


class FilterError(RpcError):
    """Bad filter rule."""

    code = -32042


class StorageError(RpcError):
    """Persisting failed; nothing was changed."""

    code = -32050


class Timeout(RpcError):
    """The call's own timeout passed."""

    code = -32060


class NotMaster(RpcError):
    """This node is a standby; `data.master` names the master (null while none)."""

    code = -32070

    @property
    def master(self) -> str | None:
        """The master's node name, as the standby knew it (None while there is none)."""
        master = self.data.get("master")
        return master if isinstance(master, str) else None


class ConnectionError(RpcError):
    """The daemon could not be reached (not running, wrong socket path, connection lost)."""

    code = -32099


# Every wire error class, by data.type and by code (ConnectionError never crosses the wire).
WIRE_ERRORS: tuple[type[RpcError], ...] = tuple(
    cls for cls in RpcError.__subclasses__() if cls is not ConnectionError
)
BY_TYPE: dict[str, type[RpcError]] = {cls.__name__: cls for cls in RpcError.__subclasses__()}
BY_CODE: dict[int, type[RpcError]] = {cls.code: cls for cls in WIRE_ERRORS}


def from_wire(error: dict[str, Any]) -> RpcError:
    """Rebuild the typed error from a JSON-RPC error object (by data.type, else by code)."""
    data = error.get("data")
    code = error.get("code")
    message = str(error.get("message", ""))
    cls: type[RpcError] | None = None
    if isinstance(data, dict):
        cls = BY_TYPE.get(str(data.get("type")))
    if cls is None and isinstance(code, int):
        cls = BY_CODE.get(code)
    exc = (cls or RpcError)(message, data if isinstance(data, dict) else None)
    if cls is None:
        exc.code = code if isinstance(code, int) else -32603
    return exc
