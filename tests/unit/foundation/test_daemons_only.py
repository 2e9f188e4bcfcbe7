"""The daemons-only rule (docs/contracts.md#who-may-call), derived by dispatch from the
declaration: refused for a peer of another uid before anything else (params, identity),
allowed for the daemon's own uid and for root, and for a param-named rule only when that
param is given a value."""

from __future__ import annotations

import asyncio
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from client._server.dispatch import build_methods, dispatch_one
from client._server.server import PeerCred
from client.api.declare import Api, rpc
from client.errors import PermissionDenied

OWN = 1000


class RuleApi(Api):
    @rpc(daemons_only=True)
    def write(self, value: int) -> int:
        """Only the daemons."""

    @rpc(daemons_only="job_id")
    def hello(self, job_id: int | None, name: str | None = None) -> str:
        """Only the daemons when job_id is given."""


class Impl:
    async def write(self, conn: Any, value: int) -> int:
        return value

    async def hello(self, conn: Any, job_id: int | None, name: str | None) -> str:
        return "hi"


class Conn:
    def __init__(self, uid: int) -> None:
        self.peer = PeerCred(pid=1, uid=uid, gid=0)


def call(uid: int, method: str, params: Any) -> Any:
    table = build_methods(RuleApi, Impl(), own_uid=OWN)
    message = {"jsonrpc": "2.0", "method": method, "params": params, "id": 1}
    return asyncio.run(dispatch_one(message, table, Conn(uid)))


def test_the_declaration_lists_permission_denied():
    assert PermissionDenied in RuleApi.methods()["write"].options.errors
    assert PermissionDenied in RuleApi.methods()["hello"].options.errors


@given(uid=st.integers(min_value=1, max_value=2**31 - 1).filter(lambda u: u != OWN))
def test_another_uid_is_refused_before_its_params_are_read(uid):
    # Even ill-typed params get PermissionDenied: the rule comes first.
    for params in ({"value": 1}, {"value": "x"}, [1, 2, 3]):
        error = call(uid, "write", params)["error"]
        assert error["data"]["type"] == "PermissionDenied"
        assert error["message"] == f"only uid {OWN} (the daemons') or root may call write"


def test_the_daemons_uid_and_root_may_call():
    for uid in (OWN, 0):
        assert call(uid, "write", {"value": 3})["result"] == 3


def test_a_param_rule_applies_only_when_the_param_has_a_value():
    assert call(4242, "hello", {"job_id": None, "name": "op"})["result"] == "hi"
    assert call(4242, "hello", [None, "op"])["result"] == "hi"
    for params in ({"job_id": 1}, [1], [1, "op"]):
        assert call(4242, "hello", params)["error"]["data"]["type"] == "PermissionDenied"
    assert call(OWN, "hello", {"job_id": 1})["result"] == "hi"
