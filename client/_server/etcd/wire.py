"""The shapes of etcd's v3 JSON gateway (`POST /v3/...`), as msgspec Structs, and op builders.

The gateway is grpc-gateway over etcd's protobuf API: bytes fields (keys, values) travel as
base64 strings, which msgspec does for `bytes` fields by itself; int64 fields come back as
JSON strings ("2"), which `decode` accepts by decoding non-strictly; fields at their zero
value are left out of answers, so every answer field has a default. Requests leave their
zero fields out too (`omit_defaults`), exactly as etcd's own gateway clients do.
"""

from __future__ import annotations

from typing import Final, Literal, TypeVar

import msgspec

T = TypeVar("T")

Key = bytes | str


def as_bytes(key: Key) -> bytes:
    """A key or value as bytes (str is taken as UTF-8)."""
    return key.encode() if isinstance(key, str) else key


def prefix_end(prefix: bytes) -> bytes:
    """The `range_end` that makes a range cover every key starting with `prefix`.

    etcd's rule (clientv3.GetPrefixRangeEnd): drop trailing 0xff bytes, add one to the last
    byte; a prefix of only 0xff bytes (or empty) means "to the end of the keyspace", b"\\0".
    """
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return b"\0"
    return stripped[:-1] + bytes([stripped[-1] + 1])


class _Request(msgspec.Struct, omit_defaults=True, forbid_unknown_fields=False):
    """Base of gateway requests: zero values are left out."""


class Header(msgspec.Struct):
    """The response header: the store revision the answer reflects, and who answered."""

    cluster_id: int = 0
    member_id: int = 0
    revision: int = 0
    raft_term: int = 0


class KeyValue(msgspec.Struct):
    """One stored key: `create_revision` 0 means the key does not exist."""

    key: bytes = b""
    create_revision: int = 0
    mod_revision: int = 0
    version: int = 0
    value: bytes = b""
    lease: int = 0


class RangeRequest(_Request):
    key: bytes
    range_end: bytes = b""
    limit: int = 0
    revision: int = 0
    serializable: bool = False
    keys_only: bool = False
    count_only: bool = False
    sort_order: int = 0  # etcd's SortOrder: 0 none, 1 ascending, 2 descending (by key)


SORT_DESCEND: Final = 2


class RangeResponse(msgspec.Struct):
    header: Header = msgspec.field(default_factory=Header)
    kvs: list[KeyValue] = msgspec.field(default_factory=list)
    more: bool = False
    count: int = 0


class PutRequest(_Request):
    key: bytes
    value: bytes = b""
    lease: int = 0
    prev_kv: bool = False


class PutResponse(msgspec.Struct):
    header: Header = msgspec.field(default_factory=Header)
    prev_kv: KeyValue | None = None


class DeleteRangeRequest(_Request):
    key: bytes
    range_end: bytes = b""
    prev_kv: bool = False


class DeleteRangeResponse(msgspec.Struct):
    header: Header = msgspec.field(default_factory=Header)
    deleted: int = 0
    prev_kvs: list[KeyValue] = msgspec.field(default_factory=list)


Target = Literal["VERSION", "CREATE", "MOD", "VALUE", "LEASE"]
Result = Literal["EQUAL", "GREATER", "LESS", "NOT_EQUAL"]


class Compare(_Request):
    """One condition of a transaction: `target` of `key` compared (`result`) with a value."""

    key: bytes
    target: Target
    result: Result
    version: int = 0
    create_revision: int = 0
    mod_revision: int = 0
    value: bytes = b""
    lease: int = 0
    range_end: bytes = b""


class RequestOp(_Request):
    """One operation of a transaction branch: exactly one field is set."""

    request_range: RangeRequest | None = None
    request_put: PutRequest | None = None
    request_delete_range: DeleteRangeRequest | None = None


class ResponseOp(msgspec.Struct):
    response_range: RangeResponse | None = None
    response_put: PutResponse | None = None
    response_delete_range: DeleteRangeResponse | None = None


class TxnRequest(_Request):
    compare: list[Compare] = msgspec.field(default_factory=list)
    success: list[RequestOp] = msgspec.field(default_factory=list)
    failure: list[RequestOp] = msgspec.field(default_factory=list)


class TxnResponse(msgspec.Struct):
    """`succeeded` says which branch ran; `responses` are that branch's answers, in order."""

    header: Header = msgspec.field(default_factory=Header)
    succeeded: bool = False
    responses: list[ResponseOp] = msgspec.field(default_factory=list)


class LeaseGrantRequest(_Request):
    TTL: int
    ID: int = 0


class LeaseGrantResponse(msgspec.Struct):
    header: Header = msgspec.field(default_factory=Header)
    ID: int = 0
    TTL: int = 0
    error: str = ""


class LeaseIdRequest(_Request):
    """Keepalive and revoke take only the lease id."""

    ID: int


class LeaseKeepAliveResponse(msgspec.Struct):
    """`TTL` 0 (left out) means the lease no longer exists."""

    header: Header = msgspec.field(default_factory=Header)
    ID: int = 0
    TTL: int = 0


class LeaseKeepAliveMessage(msgspec.Struct):
    """Keepalive is a gRPC stream: the gateway wraps its one answer in `result`."""

    result: LeaseKeepAliveResponse = msgspec.field(default_factory=LeaseKeepAliveResponse)


class LeaseRevokeResponse(msgspec.Struct):
    header: Header = msgspec.field(default_factory=Header)


class LeaseTimeToLiveRequest(_Request):
    ID: int
    keys: bool = False


class LeaseTimeToLiveResponse(msgspec.Struct):
    """`TTL` -1 means the lease has expired or never existed."""

    header: Header = msgspec.field(default_factory=Header)
    ID: int = 0
    TTL: int = 0
    grantedTTL: int = 0
    keys: list[bytes] = msgspec.field(default_factory=list)


class WatchCreateRequest(_Request):
    key: bytes
    range_end: bytes = b""
    start_revision: int = 0
    prev_kv: bool = False


class WatchRequest(_Request):
    create_request: WatchCreateRequest


class Event(msgspec.Struct):
    """A change seen by a watch; `type` PUT is etcd's zero value, so it is the default."""

    type: Literal["PUT", "DELETE"] = "PUT"
    kv: KeyValue = msgspec.field(default_factory=KeyValue)
    prev_kv: KeyValue | None = None


class WatchResponse(msgspec.Struct):
    header: Header = msgspec.field(default_factory=Header)
    watch_id: int = 0
    created: bool = False
    canceled: bool = False
    compact_revision: int = 0
    cancel_reason: str = ""
    events: list[Event] = msgspec.field(default_factory=list)


class CompactionRequest(_Request):
    revision: int
    physical: bool = False


class CompactionResponse(msgspec.Struct):
    header: Header = msgspec.field(default_factory=Header)


class StatusRequest(_Request):
    """`/v3/maintenance/status`: about the member that answers."""


class StatusResponse(msgspec.Struct):
    header: Header = msgspec.field(default_factory=Header)
    version: str = ""  # the member's etcd release, "3.5.1"
    leader: int = 0


class GatewayError(msgspec.Struct):
    """What the gateway answers with a non-200 status: `code` is the gRPC status code."""

    error: str = ""
    code: int = 0
    message: str = ""


def gateway_error(raw: bytes, status: int) -> GatewayError:
    """The error object of a non-200 answer (or one made up from the status)."""
    try:
        error = decode(raw, GatewayError)
    except msgspec.DecodeError:
        return GatewayError(error=raw[:200].decode(errors="replace"), message=f"HTTP {status}")
    if not error.message:
        error.message = error.error or f"HTTP {status}"
    return error


class WatchMessage(msgspec.Struct):
    """One line of the watch stream: a `result`, or an `error` when the stream fails."""

    result: WatchResponse | None = None
    error: GatewayError | None = None


def decode(raw: bytes, type_: type[T]) -> T:
    """Decode a gateway answer (int64 as strings, so not strict about str → int)."""
    return msgspec.json.decode(raw, type=type_, strict=False)


def span_end(key: bytes, prefix: bool, range_end: Key | None) -> bytes:
    """The range_end for one key (empty), a prefix, or an explicit end."""
    if range_end is not None:
        return as_bytes(range_end)
    return prefix_end(key) if prefix else b""


def delete_request(
    key: Key, *, prefix: bool = False, range_end: Key | None = None
) -> DeleteRangeRequest:
    """A delete of one key, a prefix, or [key, range_end)."""
    k = as_bytes(key)
    return DeleteRangeRequest(key=k, range_end=span_end(k, prefix, range_end))


def op_put(key: Key, value: Key, *, lease: int = 0) -> RequestOp:
    """A put inside a transaction."""
    return RequestOp(request_put=PutRequest(key=as_bytes(key), value=as_bytes(value), lease=lease))


def op_delete(key: Key, *, prefix: bool = False, range_end: Key | None = None) -> RequestOp:
    """A delete (one key or a range) inside a transaction."""
    return RequestOp(request_delete_range=delete_request(key, prefix=prefix, range_end=range_end))


def op_range(key: Key, *, prefix: bool = False, range_end: Key | None = None) -> RequestOp:
    """A read inside a transaction (seen at the transaction's own revision)."""
    k = as_bytes(key)
    return RequestOp(request_range=RangeRequest(key=k, range_end=span_end(k, prefix, range_end)))


def cmp_create(key: Key, revision: int, result: Result = "EQUAL") -> Compare:
    """create_revision(key) <result> revision; revision 0 with EQUAL means "key absent"."""
    return Compare(key=as_bytes(key), target="CREATE", result=result, create_revision=revision)


def cmp_mod(key: Key, revision: int, result: Result = "EQUAL") -> Compare:
    """mod_revision(key) <result> revision: optimistic concurrency on one key."""
    return Compare(key=as_bytes(key), target="MOD", result=result, mod_revision=revision)


def cmp_version(key: Key, version: int, result: Result = "EQUAL") -> Compare:
    """version(key) <result> version (the number of puts since the key was created)."""
    return Compare(key=as_bytes(key), target="VERSION", result=result, version=version)


def cmp_value(key: Key, value: Key, result: Result = "EQUAL") -> Compare:
    """value(key) <result> value."""
    return Compare(key=as_bytes(key), target="VALUE", result=result, value=as_bytes(value))
