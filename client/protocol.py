"""JSON-RPC 2.0 framing and envelopes (docs/contracts.md#framing): one compact JSON document
per line.

Shared by the server and the stubs.  Envelopes are msgspec Structs, so checking that a
decoded message is a request costs one `msgspec.convert`, not a jsonschema run.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

PROTOCOL_VERSION = 1
DEFAULT_MAX_MESSAGE_BYTES = 64 * 1024 * 1024

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
# A float literal beyond a double (1e400) becomes an infinity, so that the param check
# (client.api.numbers) answers it as InvalidParams with the request's id, not ParseError.
_request_decoder = msgspec.json.Decoder(float_hook=float)
_response_decoder = msgspec.json.Decoder(Response)


def encode(obj: Any) -> bytes:
    """Compact JSON of `obj` followed by the newline that ends a frame."""
    buf = bytearray()
    _encoder.encode_into(obj, buf)
    buf += b"\n"
    return bytes(buf)


def decode_message(line: bytes) -> Any:
    """Parse one frame into plain JSON values (raises msgspec.DecodeError)."""
    return _request_decoder.decode(line)


def decode_response(line: bytes) -> Response:
    """Parse one frame into a Response envelope (raises msgspec errors)."""
    return _response_decoder.decode(line)
