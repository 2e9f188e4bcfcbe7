"""JSON-RPC 2.0 framing and envelopes (docs/contracts.md#framing): one compact JSON document
per line.

Shared by the server and the stubs.  Envelopes are msgspec Structs, so checking that a
decoded message is a request costs one `msgspec.convert`, not a jsonschema run.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

from client import strictjson

PROTOCOL_VERSION = 1
DEFAULT_MAX_MESSAGE_BYTES = 16 * 1024 * 1024
"""The longest frame a daemon reads, without its newline (--max-message-bytes)."""

# A request id: JSON-RPC allows a string, a number or null.
RequestId = int | str | None


class Request(msgspec.Struct, omit_defaults=True):
    """A request or notification.  `id` is UNSET for a notification."""

    jsonrpc: Literal["2.0"]
    method: str
    params: dict[str, Any] | list[Any] = msgspec.field(default_factory=dict)
    id: int | str | msgspec.UnsetType | None = msgspec.UNSET


class ErrorObject(msgspec.Struct):
    """The `error` member of a response."""

    code: int
    message: str
    data: Any = None


class Response(msgspec.Struct, omit_defaults=True):
    """A response as the stubs decode it: the result stays raw until its type is known."""

    id: RequestId
    jsonrpc: str = "2.0"
    result: msgspec.Raw = msgspec.Raw(b"null")
    error: ErrorObject | None = None


_encoder = msgspec.json.Encoder()
_response_decoder = msgspec.json.Decoder(Response)


def encode(obj: Any) -> bytes:
    """Compact JSON of `obj` followed by the newline that ends a frame."""
    buf = bytearray()
    _encoder.encode_into(obj, buf)
    buf += b"\n"
    return bytes(buf)


def decode_message(line: bytes) -> Any:
    """Parse one frame into plain JSON values, strictly (client.strictjson: raises
    msgspec.DecodeError for bad JSON, JsonRefused for a duplicate key or too deep a
    nesting).  A float beyond a double (1e400) becomes an infinity, which the param check
    answers as InvalidParams with the request's id, not as bad JSON."""
    return strictjson.loads(line)


def decode_big_message(line: bytes) -> Any:
    """`decode_message` in short pieces, for a thread beside the event loop."""
    return strictjson.loads_big(line)


def decode_response(line: bytes) -> Response:
    """Parse one frame into a Response envelope (raises msgspec errors)."""
    return _response_decoder.decode(line)
