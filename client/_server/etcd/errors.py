"""Typed failures of the etcd layer, all `client.errors.StorageError` on the wire.

A daemon may let any of them reach a client: each says StorageError (code -32050) in
`data.type`, so the error contract (docs/contracts.md#errors) holds, while daemon code
catches the precise class (a `Fenced` write turns the daemon standby; `OutcomeUnknown` makes
it re-read before retrying).
"""

from __future__ import annotations

from client.errors import StorageError


class EtcdError(StorageError):
    """Base of the etcd failures; travels as StorageError."""

    @property
    def type_name(self) -> str:
        return "StorageError"


class EtcdUnavailable(EtcdError):
    """No etcd member answered in time (members down, no quorum, network): nothing was done."""


class OutcomeUnknown(EtcdError):
    """A write was sent but its answer was lost: it may or may not have been committed."""


class EtcdRequestError(EtcdError):
    """etcd refused the request itself (bad argument, too many operations, compacted)."""

    def __init__(self, message: str, grpc_code: int) -> None:
        super().__init__(message, {"grpc_code": grpc_code})
        self.grpc_code = grpc_code


class LeaseNotFound(EtcdError):
    """The lease does not exist (expired or revoked)."""


class Fenced(EtcdError):
    """The leader key is no longer ours: this node was deposed and wrote nothing."""


class CompareFailed(EtcdError):
    """A transaction's own condition (e.g. a key's mod_revision) did not hold: nothing was written."""


class ChangeTooLarge(EtcdError):
    """One change needs more operations or bytes than one etcd transaction may carry."""


class AccessRefused(EtcdError):
    """etcd refused who we are: a certificate that does not verify, a client certificate
    missing or refused, a user or password it does not accept. Never retried (asking again
    changes nothing); a daemon that meets it at start exits 1 with its message, which says
    what to fix (docs/operations.md#etcd-over-tls)."""
