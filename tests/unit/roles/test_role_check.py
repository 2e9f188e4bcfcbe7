"""The role check (docs/contracts.md#replicated-control-plane) in the dispatch
(client._server.roles, build_methods(role=)): a standby answers ping, version, identify and get_role
and NotMaster naming the master to everything else; a serving node answers everything; one check,
whatever the method."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest

from client._server.common import CommonMethods
from client._server.dispatch import build_methods, dispatch_one
from client._server.etcd.errors import Fenced
from client._server.metrics import Registry
from client._server.roles import SharedRead, SingleNode, not_master
from client.api.common import CommonApi, RoleInfo
from client.api.declare import rpc
from client.errors import NotMaster


class DemoApi(CommonApi):
    @rpc(identified=False)
    def identify(self, name: str) -> str:
        """Say who you are."""

    @rpc()
    def write(self, value: int) -> int:
        """Change something."""


class Impl:
    fenced = False

    async def identify(self, conn: Any, name: str) -> str:
        return name

    async def write(self, conn: Any, value: int) -> int:
        if self.fenced:
            raise Fenced("the leader key is no longer this node's")
        return value


class Switch:
    def __init__(self, serving: bool, master: str | None) -> None:
        self.serving = serving
        self.master = master
        self.settled = 0
        self.learns: str | None = None  # the master settle() reads from "etcd"

    async def settle(self) -> None:
        self.settled += 1
        if self.learns is not None:
            self.master, self.serving = self.learns, False

    def info(self) -> RoleInfo:
        if self.serving:
            return RoleInfo(node="me", role="master", master="me", term=7)
        return RoleInfo(node="me", role="standby", master=self.master, term=7)


def call(methods: dict[str, Any], method: str, params: dict[str, Any]) -> dict[str, Any]:
    message = {"jsonrpc": "2.0", "method": method, "params": params, "id": 1}
    answer = asyncio.run(dispatch_one(message, methods, conn=None))
    assert answer is not None
    return msgspec.to_builtins(answer)  # type: ignore[no-any-return]


@pytest.mark.parametrize("master", ["node1", None])
def test_a_standby_answers_only_the_standby_methods(master):
    role = Switch(serving=False, master=master)
    methods = build_methods(DemoApi, CommonMethods(Registry("wconfd"), role), Impl(), role=role)
    assert call(methods, "ping", {})["result"] == "pong"
    assert call(methods, "identify", {"name": "x"})["result"] == "x"
    assert call(methods, "version", {})["result"]["protocol"] == 1
    assert call(methods, "get_role", {})["result"]["role"] == "standby"
    for method, params in (("write", {"value": 1}), ("get_metrics", {})):
        error = call(methods, method, params)["error"]
        assert error["code"] == -32070
        assert error["data"] == {"type": "NotMaster", "master": master}
    # Not even bad params get past the role check: a standby judges nothing.
    assert call(methods, "write", {"value": "x"})["error"]["code"] == -32070
    role.serving = True
    assert call(methods, "write", {"value": 5})["result"] == 5
    assert call(methods, "get_role", {})["result"] == {
        "node": "me",
        "role": "master",
        "master": "me",
        "term": 7,
    }


def test_single_node_is_master_of_term_0_and_messages_name_the_master():
    info = SingleNode("solo").info()
    assert info == RoleInfo(node="solo", role="master", master="solo", term=0)
    assert SingleNode("solo").serving
    error = not_master(Switch(serving=False, master="node3"))
    assert isinstance(error, NotMaster) and error.master == "node3"
    assert "the master is node3" in error.message
    assert "no master right now" in not_master(Switch(serving=False, master=None)).message


def test_no_node_names_itself_the_master_in_a_not_master():
    error = not_master(Switch(serving=False, master="me"))
    assert error.master is None and "the master is me" not in error.message
    assert "taking over or giving up" in error.message


def test_a_refusal_settles_the_role_first_and_names_the_master_it_learns():
    role = Switch(serving=False, master="me")
    role.learns = "node2"
    methods = build_methods(DemoApi, CommonMethods(Registry("wconfd")), Impl(), role=role)
    error = call(methods, "write", {"value": 1})["error"]
    assert error["data"] == {"type": "NotMaster", "master": "node2"} and role.settled == 1


def test_a_fenced_write_answers_not_master_not_a_storage_error():
    role, impl = Switch(serving=True, master="me"), Impl()
    impl.fenced = True
    methods = build_methods(DemoApi, CommonMethods(Registry("luxid")), impl, role=role)
    role.learns = "node2"
    assert call(methods, "write", {"value": 1})["error"]["data"]["master"] == "node2"


def test_without_a_role_every_method_is_served():
    methods = build_methods(DemoApi, CommonMethods(Registry("wconfd")), Impl())
    assert call(methods, "write", {"value": 3})["result"] == 3


def test_a_shared_read_serves_every_caller_while_it_runs_and_is_not_repeated_at_once():
    reads: list[float] = []
    now = [0.0]

    async def read() -> None:
        reads.append(now[0])
        await asyncio.sleep(0.01)

    async def main() -> None:
        shared = SharedRead(read, min_interval=0.25, clock=lambda: now[0])
        await asyncio.gather(*(shared(1.0) for _ in range(20)))
        assert len(reads) == 1
        await shared(1.0)  # within min_interval of the last: no read
        assert len(reads) == 1
        now[0] = 0.3
        await shared(1.0)
        assert reads == [0.0, 0.3]

    asyncio.run(main())


def test_a_failing_shared_read_leaves_things_as_they_were():
    async def read() -> None:
        raise Fenced("etcd did not answer")

    async def main() -> None:
        await SharedRead(read)(1.0)  # no exception, none left unretrieved

    asyncio.run(main())
