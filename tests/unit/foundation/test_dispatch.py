"""dispatch_one, the request pipeline of both daemons (docs/contracts.md#wire-protocol): the answer
to every kind of request - by name, by position, notification, unknown method, bad envelope, params
that do not bind, typed errors, a crashing wrapper - is the JSON-RPC 2.0 object the wire protocol
names, with `data.type` the contract."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client._server.common import CommonMethods
from client._server.dispatch import build_methods, dispatch_one
from client._server.metrics import Registry
from client._server.roles import SingleNode
from client.api.common import CommonApi
from client.api.declare import rpc
from client.errors import NotFound


class DemoApi(CommonApi):
    @rpc(identified=False)
    def add(self, a: int, b: int = 1) -> int:
        """a + b."""

    @rpc(identified=False)
    def lookup(self, name: str) -> str:
        """Always NotFound."""


class Impl:
    def __init__(self) -> None:
        self.calls: list[tuple[Any, int, int]] = []

    async def add(self, conn: Any, a: int, b: int) -> int:
        self.calls.append((conn, a, b))
        return a + b

    async def lookup(self, conn: Any, name: str) -> str:
        raise NotFound(f"no object named {name!r}")


def methods(impl: Impl | None = None) -> dict[str, Any]:
    common = CommonMethods(Registry("wconfd"), SingleNode("me"))
    return build_methods(DemoApi, impl or Impl(), common)


def answer(message: Any, table: dict[str, Any] | None = None, conn: Any = "conn") -> Any:
    return asyncio.run(dispatch_one(message, table or methods(), conn))


def test_params_by_name_and_by_position_reach_the_implementation_with_the_caller():
    impl = Impl()
    table = methods(impl)
    by_name = {"jsonrpc": "2.0", "method": "add", "params": {"a": 2, "b": 3}, "id": 7}
    by_position = {"jsonrpc": "2.0", "method": "add", "params": [2], "id": "x"}
    assert answer(by_name, table) == {"jsonrpc": "2.0", "result": 5, "id": 7}
    assert answer(by_position, table) == {"jsonrpc": "2.0", "result": 3, "id": "x"}
    assert impl.calls == [("conn", 2, 3), ("conn", 2, 1)]


def test_a_notification_runs_and_gets_no_answer():
    impl = Impl()
    message = {"jsonrpc": "2.0", "method": "add", "params": {"a": 1}}
    assert answer(message, methods(impl)) is None
    assert impl.calls == [("conn", 1, 1)]
    # Not even an error answer for a notification of an unknown method.
    assert answer({"jsonrpc": "2.0", "method": "nope"}) is None


def test_unknown_method_is_method_not_found_naming_it():
    got = answer({"jsonrpc": "2.0", "method": "nope", "id": 1})
    assert got["id"] == 1 and "result" not in got
    assert got["error"]["code"] == -32601
    assert got["error"]["data"] == {"type": "MethodNotFound"}
    assert "nope" in got["error"]["message"]


@pytest.mark.parametrize(
    "message",
    [
        {"jsonrpc": "1.0", "method": "add", "id": 3},
        {"method": "add", "id": 3},
        {"jsonrpc": "2.0", "method": 5, "id": 3},
        {"jsonrpc": "2.0", "method": "add", "params": 5, "id": 3},
        {"jsonrpc": "2.0", "method": "add", "id": [3]},
        "a string",
        7,
    ],
)
def test_a_bad_envelope_is_invalid_request_with_the_id_when_usable(message):
    got = answer(message)
    assert got["error"]["code"] == -32600
    assert got["error"]["data"] == {"type": "InvalidRequest"}
    usable = isinstance(message, dict) and isinstance(message.get("id"), int)
    assert got["id"] == (3 if usable else None)


def test_params_that_do_not_bind_are_invalid_params():
    # `conn` is the handler's own first parameter: a param of that name cannot bind.
    got = answer({"jsonrpc": "2.0", "method": "add", "params": {"conn": 1, "a": 1}, "id": 1})
    assert got["error"]["data"]["type"] == "InvalidParams"
    assert got["error"]["code"] == -32602


def test_ill_typed_params_are_invalid_params_naming_the_param():
    got = answer({"jsonrpc": "2.0", "method": "add", "params": {"a": "two"}, "id": 1})
    assert got["error"]["data"]["type"] == "InvalidParams"
    assert "`a`" in got["error"]["message"]


def test_a_typed_error_keeps_its_type_and_message():
    got = answer({"jsonrpc": "2.0", "method": "lookup", "params": ["x"], "id": 2})
    assert got == {
        "jsonrpc": "2.0",
        "error": {"code": -32022, "message": "no object named 'x'", "data": {"type": "NotFound"}},
        "id": 2,
    }


def test_a_wrapper_that_crashes_is_an_internal_error_without_details():
    async def broken(conn: Any) -> Any:
        raise RuntimeError("secret traceback material")

    got = answer({"jsonrpc": "2.0", "method": "broken", "id": 1}, {"broken": broken})
    assert got["error"]["data"] == {"type": "InternalError"}
    assert "secret" not in got["error"]["message"]


@given(
    a=st.integers(-(2**63), 2**63 - 2),
    request_id=st.one_of(st.integers(-(2**63), 2**63 - 1), st.text(max_size=20)),
)
def test_every_valid_call_is_answered_with_its_own_id(a, request_id):
    got = answer({"jsonrpc": "2.0", "method": "add", "params": {"a": a}, "id": request_id})
    assert got == {"jsonrpc": "2.0", "result": a + 1, "id": request_id}
