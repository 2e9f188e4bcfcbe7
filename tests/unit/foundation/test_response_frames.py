"""Answer frames as the stubs read them (client.protocol.decode_response): a large result in
the daemons' own layout is cut at its head and tail rather than scanned, and whatever the
layout of a valid response, the stub gets the same id and result as from decoding the
frame whole."""

from __future__ import annotations

import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client import WConfdClient, protocol
from client.protocol import RESULT_HEAD, CutResponse, decode_response

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=12,
)
ids = st.integers(0, 2**53)


@pytest.fixture(autouse=True)
def cut_every_frame(monkeypatch: pytest.MonkeyPatch) -> None:
    """Small frames are scanned whole; here every frame may be cut."""
    monkeypatch.setattr(protocol, "_CUT_FROM", 0)


def result_of(frame: bytes) -> tuple[object, object]:
    """The id and the result a stub gets from `frame` (get_config's: any JSON)."""
    stub = WConfdClient("/nonexistent.sock")
    response = decode_response(frame)
    return response.id, stub._result(stub._api.methods()["get_config"], response)


@given(json_values, ids, st.booleans())
def test_a_frame_as_the_daemons_write_it_is_cut_not_scanned(result, request_id, newline):
    frame = RESULT_HEAD + msgspec.json.encode(result) + b',"id":%d}' % request_id
    response = decode_response(frame + b"\n" * newline)
    assert isinstance(response, CutResponse)
    assert response.id == request_id
    assert bytes(response.result) == msgspec.json.encode(result)
    assert result_of(frame) == (request_id, result)


members = st.permutations(["jsonrpc", "result", "id", "extra"])


@given(json_values, ids, members, st.booleans(), st.sampled_from([(",", ":"), (", ", ": ")]))
def test_any_layout_gives_the_same_answer_as_decoding_it_whole(
    result, request_id, order, with_extra, separators
):
    values = {"jsonrpc": "2.0", "result": result, "id": request_id, "extra": {"id": 1}}
    envelope = {k: values[k] for k in order if with_extra or k != "extra"}
    frame = json.dumps(envelope, separators=separators).encode()
    assert result_of(frame) == (request_id, result)


@given(json_values, ids)
def test_an_id_in_the_result_is_not_taken_for_the_frames(result, request_id):
    tricky = [result, {"id": 7}, ',"id":8}']
    frame = RESULT_HEAD + msgspec.json.encode(tricky) + b',"id":%d}' % request_id
    assert result_of(frame) == (request_id, tricky)
