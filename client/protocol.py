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


class CutResponse(Response):
    """A large result frame in the daemons' own layout, cut at its known head and tail
    instead of scanned (see `decode_response`); `frame` is kept for `uncut`."""

    frame: bytes | memoryview = b""


RESULT_HEAD = b'{"jsonrpc":"2.0","result":'
"""How the daemons begin every result frame (client._server.server writes it so)."""
_ID_MEMBER = b',"id":'
_CUT_FROM = 1 << 16  # smaller frames are scanned whole: the cut would save nothing
_MAX_ID_DIGITS = 18

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


def decode_response(line: bytes | memoryview) -> Response:
    """Parse one frame into a Response envelope (raises msgspec errors).

    A large result frame as the daemons write it, `{"jsonrpc":"2.0","result":R,"id":N}`,
    is cut at its head and tail rather than scanned to find where R ends: get_config of
    100,000 instances is 50 MB, and that scan cost as much again as reading it.  R is then
    checked when it is decoded, which must find it one JSON value; where it does not, the
    frame was laid out otherwise, and `uncut` decodes it whole.  A memoryview `line` (the
    sync stub's receive mapping) is read in place: the result refers to it."""
    if len(line) >= _CUT_FROM:
        cut = _cut(memoryview(line))
        if cut is not None:
            return cut
    return _response_decoder.decode(line)


def _cut(line: memoryview) -> CutResponse | None:
    """`line` cut as `RESULT_HEAD` R `,"id":N}` with N a JSON integer, else None."""
    if line[: len(RESULT_HEAD)] != RESULT_HEAD:
        return None
    end = len(line) - 1 if line[-1:] == b"\n" else len(line)
    # The tail that can hold `,"id":N}`: N has at most _MAX_ID_DIGITS digits.
    tail_from = max(len(RESULT_HEAD), end - len(_ID_MEMBER) - _MAX_ID_DIGITS - 1)
    tail = bytes(line[tail_from:end])
    at = tail.rfind(_ID_MEMBER)
    digits = tail[at + len(_ID_MEMBER) : -1]
    if at < 0 or not tail.endswith(b"}") or not digits.isdigit():
        return None
    if digits[0] == ord("0") and len(digits) > 1:  # 05 is not JSON
        return None
    result = msgspec.Raw(line[len(RESULT_HEAD) : tail_from + at])
    return CutResponse(id=int(digits), result=result, frame=line)


def uncut(response: CutResponse) -> Response:
    """The envelope of a cut frame decoded whole (raises msgspec errors if it is not JSON)."""
    return _response_decoder.decode(response.frame)
