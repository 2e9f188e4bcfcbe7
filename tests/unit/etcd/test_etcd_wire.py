"""The gateway shapes (client._server.etcd.wire) and the store URL (url): the pure etcd parts.

The real gateway's behaviour is tested in tests/integration/test_etcd_client.py; here: the
prefix rule, the JSON the requests encode to, answers as the gateway writes them, and the
parsing of `etcd://` URLs.
"""

from __future__ import annotations

import base64
import json

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from client._server.etcd.url import DEFAULT_PREFIX, parse_store_url
from client._server.etcd.wire import (
    RangeResponse,
    TxnRequest,
    TxnResponse,
    cmp_create,
    decode,
    op_delete,
    op_put,
    prefix_end,
)


@given(st.binary(max_size=6), st.binary(max_size=6))
def test_prefix_end_bounds_exactly_the_keys_with_the_prefix(prefix: bytes, key: bytes) -> None:
    end = prefix_end(prefix)
    in_range = prefix <= key and (end == b"\0" or key < end)
    assert in_range == key.startswith(prefix)


@given(st.binary(min_size=1, max_size=4), st.binary(max_size=4))
def test_prefix_end_covers_longer_keys(prefix: bytes, tail: bytes) -> None:
    end = prefix_end(prefix)
    assert end == b"\0" or prefix + tail < end


def test_requests_encode_as_the_gateway_expects() -> None:
    txn = TxnRequest(
        compare=[cmp_create("/lw/leader", 0)],
        success=[op_put("/lw/leader", "node1", lease=7)],
        failure=[op_delete("/lw/x/", prefix=True)],
    )
    doc = json.loads(msgspec.json.encode(txn))
    b64 = lambda raw: base64.b64encode(raw).decode()  # noqa: E731
    assert doc == {
        # create_revision 0 is left out (proto3 zero value), target and result are not.
        "compare": [{"key": b64(b"/lw/leader"), "target": "CREATE", "result": "EQUAL"}],
        "success": [
            {"request_put": {"key": b64(b"/lw/leader"), "value": b64(b"node1"), "lease": 7}}
        ],
        "failure": [{"request_delete_range": {"key": b64(b"/lw/x/"), "range_end": b64(b"/lw/x0")}}],
    }


def test_answers_decode_with_int64_as_strings_and_zero_fields_left_out() -> None:
    raw = json.dumps(
        {
            "header": {"cluster_id": "15118495548433857066", "revision": "42", "raft_term": "2"},
            "kvs": [
                {
                    "key": base64.b64encode(b"k").decode(),
                    "create_revision": "40",
                    "mod_revision": "42",
                    "version": "3",
                }
            ],
            "count": "1",
        }
    ).encode()
    answer = decode(raw, RangeResponse)
    assert answer.header.revision == 42 and answer.header.cluster_id == 15118495548433857066
    kv = answer.kvs[0]
    assert (kv.key, kv.value, kv.create_revision, kv.version, kv.lease) == (b"k", b"", 40, 3, 0)
    assert not answer.more and answer.count == 1
    failed = decode(
        b'{"header":{"revision":"9"},"responses":[{"response_range":{"header":{}}}]}', TxnResponse
    )
    assert not failed.succeeded and failed.responses[0].response_range is not None


def test_store_urls() -> None:
    one = parse_store_url("etcd://127.0.0.1:2379")
    assert one.endpoints == ("http://127.0.0.1:2379",) and one.prefix == DEFAULT_PREFIX
    many = parse_store_url("etcd://a:1,b.example:2379,[::1]:2380/lw/prod/")
    assert many.endpoints == ("http://a:1", "http://b.example:2379", "http://[::1]:2380")
    assert many.prefix == "/lw/prod"
    assert parse_store_url("etcd://a:1/").prefix == DEFAULT_PREFIX
    for bad in (
        "http://a:1",
        "etcd://",
        "etcd://a",
        "etcd://a:x",
        "etcd://a:1,:2",
        "etcd://a:70000",
    ):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_store_url(bad)


@given(
    st.lists(
        st.tuples(st.from_regex(r"[a-z][a-z0-9.-]{0,10}", fullmatch=True), st.integers(1, 65535)),
        min_size=1,
        max_size=4,
    ),
    st.from_regex(r"(/[a-z0-9_-]{1,8}){0,3}", fullmatch=True),
)
def test_store_url_round_trip(members: list[tuple[str, int]], prefix: str) -> None:
    url = "etcd://" + ",".join(f"{h}:{p}" for h, p in members) + prefix
    parsed = parse_store_url(url)
    assert parsed.endpoints == tuple(f"http://{h}:{p}" for h, p in members)
    assert parsed.prefix == (prefix or DEFAULT_PREFIX)
