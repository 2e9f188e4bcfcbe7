"""EtcdClient's fail-over rules with scripted members (small aiohttp servers), where real
etcd cannot be made to answer on cue: a write goes to another member only when it cannot
have been applied; a read goes on until its budget ends; the errors say what happened.

Real members are in tests/integration/test_etcd_*.py.
"""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
from aiohttp import web

from client._server.etcd.client import EtcdClient
from client._server.etcd.errors import (
    EtcdRequestError,
    EtcdUnavailable,
    LeaseNotFound,
    OutcomeUnknown,
)

OK_PUT = {"header": {"revision": "7"}}


def unavailable(message: str) -> web.Response:
    body = {"error": message, "code": 14, "message": message}
    return web.json_response(body, status=503)


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@asynccontextmanager
async def members(
    *handlers: Handler, dead_first: bool = False, **options: float
) -> AsyncIterator[tuple[EtcdClient, list[list[str]]]]:
    """Serve each handler as one member (after a dead one if `dead_first`); yields a client
    of them all and the paths each served member was asked, in order."""
    asked: list[list[str]] = [[] for _ in handlers]
    runners = []
    endpoints = []
    for i, handler in enumerate(handlers):

        async def serve(
            request: web.Request, i: int = i, handler: Handler = handler
        ) -> web.StreamResponse:
            asked[i].append(request.path)
            return await handler(request)

        app = web.Application()
        app.router.add_post("/{tail:.*}", serve)
        runner = web.AppRunner(app, shutdown_timeout=0.1)  # don't wait for hung handlers
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        endpoints.append(f"http://127.0.0.1:{port}")
        runners.append(runner)
    client = EtcdClient([dead_endpoint()] * dead_first + endpoints, **options)
    try:
        yield client, asked
    finally:
        await client.close()
        for runner in runners:
            await runner.cleanup()


def dead_endpoint() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"  # closed again: connection refused


async def ok(request: web.Request) -> web.Response:
    return web.json_response(OK_PUT)


def test_a_write_refused_for_want_of_a_leader_goes_to_the_next_member() -> None:
    async def no_leader(request: web.Request) -> web.Response:
        return unavailable("etcdserver: no leader")

    async def main() -> None:
        async with members(no_leader, ok, dead_first=True) as (client, asked):
            answer = await client.put("k", "v")
            assert answer.header.revision == 7
            assert asked == [["/v3/kv/put"], ["/v3/kv/put"]]
            await client.put("k", "v")  # it stays with the member that answered
            assert len(asked[1]) == 2 and len(asked[0]) == 1

    asyncio.run(main())


def test_a_write_that_may_have_been_applied_is_not_sent_again() -> None:
    async def timed_out(request: web.Request) -> web.Response:
        return unavailable("etcdserver: request timed out")

    async def hangs(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.json_response(OK_PUT)

    async def main() -> None:
        async with members(timed_out, hangs, ok, timeout=0.5) as (client, asked):
            with pytest.raises(OutcomeUnknown, match="may or may not"):
                await client.txn([], [])
            assert asked == [["/v3/kv/txn"], [], []]
            started = time.monotonic()
            with pytest.raises(OutcomeUnknown, match="no answer in time"):
                await client.put("k", "v")  # now on the hanging member
            assert time.monotonic() - started < 1.0
            assert asked[1] == ["/v3/kv/put"] and asked[2] == []
            # A read is safe to repeat: it moves on to the member that answers.
            answer = await client.range("k")
            assert answer.header.revision == 7

    asyncio.run(main())


def test_reads_go_round_the_members_until_their_budget_ends() -> None:
    async def hangs(request: web.Request) -> web.Response:
        await asyncio.sleep(10)
        return web.json_response({})

    async def main() -> None:
        options = {"timeout": 1.0, "attempt_timeout": 0.3}
        async with members(hangs, dead_first=True, **options) as (client, asked):
            started = time.monotonic()
            with pytest.raises(EtcdUnavailable, match="quorum") as info:
                await client.range("k")
            assert 0.9 < time.monotonic() - started < 2.0  # the budget (1 s), not the 10 s hang
            assert "cannot connect" in info.value.message
            assert "no answer in time" in info.value.message
            assert len(asked[0]) >= 2

    asyncio.run(main())


def test_refusals_and_garbage_are_typed() -> None:
    async def refuses(request: web.Request) -> web.Response:
        if request.path in ("/v3/lease/revoke", "/v3/kv/put"):
            msg = "etcdserver: requested lease not found"
            return web.json_response({"error": msg, "code": 5, "message": msg}, status=404)
        if request.path == "/v3/kv/range":
            return web.Response(text="<html>not etcd</html>")
        msg = "etcdserver: too many operations in txn request"
        return web.json_response({"error": msg, "code": 3, "message": msg}, status=400)

    async def main() -> None:
        async with members(refuses) as (client, _):
            with pytest.raises(EtcdRequestError, match="too many operations") as info:
                await client.txn([], [])
            assert info.value.grpc_code == 3
            assert info.value.to_wire()["data"]["type"] == "StorageError"
            assert await client.lease_revoke(1) is False
            with pytest.raises(LeaseNotFound):
                await client.put("k", "v", lease=1)
            with pytest.raises(EtcdRequestError, match="unreadable"):
                await client.range("k")

    asyncio.run(main())


def test_lease_keepalive_reads_the_streamed_result() -> None:
    async def keepalive(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        assert body == {"ID": 42}
        return web.json_response({"result": {"header": {}, "ID": "42", "TTL": "3"}})

    async def main() -> None:
        async with members(keepalive) as (client, _):
            assert await client.lease_keepalive(42) == 3

    asyncio.run(main())
