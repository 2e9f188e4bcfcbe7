"""`EtcdClient`: etcd v3 over its JSON gateway, with aiohttp, for asyncio daemons.

Why the gateway and not gRPC: the daemons already depend on aiohttp (rapi), every etcd 3.x
member serves `/v3/...` on its client port, and Patroni runs on the same gateway in
production; a gRPC stack would add a large compiled dependency for a few calls.

Fail-over between members: the client sticks to the member that answered last and moves to
the next one when a member cannot be reached or says it is unavailable (no leader). A read
is retried on another member until the call's time budget (`timeout`) runs out. A write is
retried only where etcd cannot have applied it (the connection was never made, or the
member had no leader to propose to); when a write was sent and its answer lost, the call
fails with `OutcomeUnknown` instead of running it twice. Every failure is a `StorageError`
(see `errors`) whose message says what was wrong and what to check.

Security (docs/operations.md#etcd-over-tls): with `security` the endpoints are https and
verified against its CA (`tls`), a client certificate is presented when given, and etcd's
own user authenticates and renews its token (`auth`). A refusal of who we are
(`AccessRefused`) is raised at once, never retried on another member.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import time
from collections.abc import AsyncGenerator, Callable, Sequence
from typing import Self, TypeVar

import aiohttp
import msgspec

from client._server.etcd import tls, wire
from client._server.etcd.auth import TokenAuth, expired
from client._server.etcd.errors import (
    AccessRefused,
    EtcdError,
    EtcdRequestError,
    EtcdUnavailable,
    LeaseNotFound,
    OutcomeUnknown,
)
from client._server.etcd.watch_stream import TokenRefused, watch_stream
from client._server.etcd.wire import Key
from client.etcd_security import EtcdSecurity

T = TypeVar("T")

# gRPC status codes the gateway reports in `code`.
_NOT_FOUND = 5
_UNAVAILABLE = 14
_DEADLINE_EXCEEDED = 4
# Answers that prove a write was not proposed to raft, so another member may take it.
_NOT_PROPOSED = ("etcdserver: no leader", "etcdserver: not capable")
_RETRY_PAUSE = 0.05
DEFAULT_TIMEOUT = 5.0


class EtcdClient:
    """One connection pool to an etcd cluster; methods are coroutines, one per v3 call.

    `endpoints` are base URLs (`http://127.0.0.1:2379`). `timeout` is the whole budget of
    one call across members: the default outlasts etcd electing a new leader after its
    leader died (1 to 2.5 s with etcd's default 1 s election timeout), during which writes
    wait, so the death of one member fails no call. `attempt_timeout` bounds one member's
    answer to a read, so a hung member costs a read only that long before the next member
    is asked.
    """

    def __init__(
        self,
        endpoints: Sequence[str],
        *,
        timeout: float = DEFAULT_TIMEOUT,
        attempt_timeout: float = 1.0,
        connect_timeout: float = 0.5,
        security: EtcdSecurity | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("EtcdClient needs at least one endpoint")
        self.endpoints = [e.rstrip("/") for e in endpoints]
        self.timeout = timeout
        self.attempt_timeout = attempt_timeout
        self.connect_timeout = connect_timeout
        self._current = 0
        self._session: aiohttp.ClientSession | None = None
        self.security = security or EtcdSecurity()
        self._ssl = tls.ssl_context(self.security)
        self.auth = (
            TokenAuth(self.security.user, self.security.password_file)
            if self.security.user is not None and self.security.password_file is not None
            else None
        )

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the connection pool (the client may be used again; it reopens)."""
        if self._session is not None:
            await self._session.close()
            self._session = None

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=None, sock_connect=self.connect_timeout),
                connector=aiohttp.TCPConnector(
                    limit=64, force_close=False, ssl=self._ssl if self._ssl else True
                ),
            )
        return self._session

    async def _send(
        self, endpoint: str, path: str, payload: bytes, headers: dict[str, str] | None = None
    ) -> tuple[int, bytes]:
        """POST: (status, body); a refused handshake or certificate is AccessRefused."""
        try:
            async with self._http().post(
                endpoint + path, data=payload, headers=headers
            ) as response:
                status, raw = response.status, await response.read()
        except (aiohttp.ClientError, OSError) as exc:
            refused = tls.refusal(exc, endpoint, self.security)
            if refused is not None:
                raise refused from None
            raise
        if status == 400 and tls.CN_REFUSAL.encode() in raw:
            raise tls.common_name_refused(endpoint)
        return status, raw

    async def _post(self, endpoint: str, path: str, payload: bytes) -> tuple[int, bytes]:
        """POST with the user's token (authenticating first if needed); an expired token
        is renewed once and the call repeated (etcd refused it before applying it)."""
        if self.auth is None:
            status, raw = await self._send(endpoint, path, payload)
        else:
            for attempt in range(2):
                seen = await self.auth.ensure(self._send, endpoint)
                status, raw = await self._send(endpoint, path, payload, self.auth.headers())
                if status == 200 or attempt or not expired(status, wire.gateway_error(raw, status)):
                    break
                await self.auth.renew(self._send, endpoint, seen)
        return status, raw

    async def check_access(self, prefix: str) -> None:
        """Raise AccessRefused when etcd refuses our certificate, user or key range: the
        daemons call it before serving (docs/operations.md#etcd-over-tls). Members that
        cannot be reached now are no refusal: the daemon starts and keeps trying."""
        try:
            await self.range(prefix.encode(), prefix=True, count_only=True)
        except EtcdUnavailable:
            return
        except EtcdRequestError as exc:
            if "permission denied" in exc.message:
                who = self.security.user or "(no --etcd-user)"
                raise AccessRefused(
                    f"etcd: user {who} may not read the keys under {prefix} (grant it a role "
                    "with readwrite on that prefix; see docs/operations.md#etcd-over-tls)"
                ) from None
            if "user name is empty" in exc.message:
                raise AccessRefused(
                    "etcd has authentication on: give --etcd-user NAME and "
                    "--etcd-password-file FILE"
                ) from None
            raise

    def _members_in_turn(self) -> itertools.cycle[int]:
        """Member indexes starting with the last good one, round and round."""
        n = len(self.endpoints)
        return itertools.cycle([(self._current + i) % n for i in range(n)])

    async def _call(
        self,
        path: str,
        body: msgspec.Struct,
        answer: type[T],
        *,
        write: bool,
        timeout: float | None = None,
        attempt: float | None = None,
    ) -> T:
        """POST `body` to `path` on a live member and decode its answer (see module doc);
        `attempt` replaces `attempt_timeout` for this call's reads."""
        budget = self.timeout if timeout is None else timeout
        per_member = self.attempt_timeout if attempt is None else attempt
        deadline = time.monotonic() + budget
        payload = msgspec.json.encode(body)
        problems: list[str] = []
        for index in self._members_in_turn():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            endpoint = self.endpoints[index]
            limit = remaining if write else min(remaining, per_member)
            try:
                async with asyncio.timeout(limit):
                    status, raw = await self._post(endpoint, path, payload)
            except EtcdUnavailable as exc:  # could not authenticate there: nothing sent
                problems.append(f"{endpoint}: {exc.message}")
                await _pause(deadline)
                continue
            except (aiohttp.ClientConnectorError, aiohttp.ServerTimeoutError) as exc:
                # Never connected (only the connect phase has its own timeout): nothing sent.
                problems.append(f"{endpoint}: cannot connect ({exc})")
                await _pause(deadline)
                continue
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                reason = "no answer in time" if isinstance(exc, TimeoutError) else repr(exc)
                self._current = (index + 1) % len(self.endpoints)  # the next call tries another
                if write:
                    raise OutcomeUnknown(
                        f"etcd write {path} sent to {endpoint} got no answer ({reason}); it may "
                        "or may not have been committed: read the keys again before retrying"
                    ) from exc
                problems.append(f"{endpoint}: {reason}")
                await _pause(deadline)
                continue
            if status == 200:
                self._current = index
                try:
                    return wire.decode(raw, answer)
                except msgspec.DecodeError as exc:
                    what = f"etcd {endpoint} answered {path} with something unreadable ({exc})"
                    if write:
                        raise OutcomeUnknown(f"{what}; the write may have been committed") from exc
                    raise EtcdRequestError(
                        f"{what}: is it an etcd v3.4+ member with its JSON gateway?", 0
                    ) from exc
            error = wire.gateway_error(raw, status)
            if error.code in (_UNAVAILABLE, _DEADLINE_EXCEEDED):
                self._current = (index + 1) % len(self.endpoints)
                if write and not error.message.startswith(_NOT_PROPOSED):
                    raise OutcomeUnknown(
                        f"etcd write {path} on {endpoint} failed with {error.message!r}; it may "
                        "or may not have been committed: read the keys again before retrying"
                    )
                problems.append(f"{endpoint}: {error.message}")
                await _pause(deadline)
                continue
            if error.code == _NOT_FOUND and "lease not found" in error.message:
                raise LeaseNotFound(f"etcd {path}: {error.message}")
            raise EtcdRequestError(f"etcd refused {path}: {error.message}", error.code)
        raise EtcdUnavailable(
            f"etcd did not answer {path} within {budget:g} s "
            f"({'; '.join(problems[-len(self.endpoints) :]) or 'no member tried'}); "
            "check that a quorum of the etcd members is up and reachable"
        )

    # -- key-value -------------------------------------------------------------------------

    async def range(
        self,
        key: Key,
        *,
        prefix: bool = False,
        range_end: Key | None = None,
        limit: int = 0,
        revision: int = 0,
        serializable: bool = False,
        keys_only: bool = False,
        count_only: bool = False,
        descending: bool = False,
    ) -> wire.RangeResponse:
        """Read one key, a prefix or [key, range_end), at `revision` (0: the newest);
        `descending`: the last keys first."""
        k = wire.as_bytes(key)
        request = wire.RangeRequest(
            key=k,
            range_end=wire.span_end(k, prefix, range_end),
            limit=limit,
            revision=revision,
            serializable=serializable,
            keys_only=keys_only,
            count_only=count_only,
            sort_order=wire.SORT_DESCEND if descending else 0,
        )
        return await self._call("/v3/kv/range", request, wire.RangeResponse, write=False)

    async def get(self, key: Key) -> wire.KeyValue | None:
        """One key, or None if it does not exist."""
        kvs = (await self.range(key)).kvs
        return kvs[0] if kvs else None

    async def put(self, key: Key, value: Key, *, lease: int = 0) -> wire.PutResponse:
        """Store `value` at `key` (attached to `lease` if given)."""
        request = wire.PutRequest(key=wire.as_bytes(key), value=wire.as_bytes(value), lease=lease)
        return await self._call("/v3/kv/put", request, wire.PutResponse, write=True)

    async def delete(
        self, key: Key, *, prefix: bool = False, range_end: Key | None = None
    ) -> wire.DeleteRangeResponse:
        """Delete one key, a prefix or [key, range_end); `deleted` says how many."""
        request = wire.delete_request(key, prefix=prefix, range_end=range_end)
        return await self._call("/v3/kv/deleterange", request, wire.DeleteRangeResponse, write=True)

    async def txn(
        self,
        compare: Sequence[wire.Compare],
        success: Sequence[wire.RequestOp],
        failure: Sequence[wire.RequestOp] = (),
        *,
        timeout: float | None = None,
    ) -> wire.TxnResponse:
        """If every compare holds run `success`, else `failure`: atomically, as one revision.

        `timeout` replaces the client's budget for this call."""
        request = wire.TxnRequest(
            compare=list(compare), success=list(success), failure=list(failure)
        )
        return await self._call(
            "/v3/kv/txn", request, wire.TxnResponse, write=True, timeout=timeout
        )

    async def compact(self, revision: int) -> None:
        """Drop the history before `revision` (the state stays): etcd keeps every version
        until compacted, so the master compacts now and then (the seam's "compact" step)."""
        request = wire.CompactionRequest(revision=revision)
        await self._call("/v3/kv/compaction", request, wire.CompactionResponse, write=False)

    async def status(self) -> wire.StatusResponse:
        """The answering member's status: its release, its leader."""
        request = wire.StatusRequest()
        return await self._call("/v3/maintenance/status", request, wire.StatusResponse, write=False)

    # -- leases ----------------------------------------------------------------------------

    async def lease_grant(self, ttl: int) -> wire.LeaseGrantResponse:
        """A new lease of `ttl` seconds (etcd may raise a TTL below its minimum)."""
        request = wire.LeaseGrantRequest(TTL=ttl)
        # Granting twice only leaves a spare lease that expires by itself: safe to retry.
        answer = await self._call("/v3/lease/grant", request, wire.LeaseGrantResponse, write=False)
        if answer.error or not answer.ID:
            raise EtcdRequestError(f"etcd refused a lease of {ttl} s: {answer.error}", 0)
        return answer

    async def lease_keepalive(
        self, lease_id: int, *, timeout: float | None = None, attempt: float | None = None
    ) -> int:
        """Renew the lease; returns its TTL again, or 0 when the lease is gone (expired).
        `timeout`: the whole budget; `attempt`: the limit on one member's answer."""
        message = await self._call(
            "/v3/lease/keepalive",
            wire.LeaseIdRequest(ID=lease_id),
            wire.LeaseKeepAliveMessage,
            write=False,
            timeout=timeout,
            attempt=attempt,
        )
        return message.result.TTL

    async def lease_revoke(self, lease_id: int) -> bool:
        """Revoke the lease, deleting its keys; False if it was already gone."""
        try:
            await self._call(
                "/v3/lease/revoke",
                wire.LeaseIdRequest(ID=lease_id),
                wire.LeaseRevokeResponse,
                write=False,  # revoking twice is harmless: the second finds no lease
            )
        except LeaseNotFound:
            return False
        return True

    async def lease_time_to_live(
        self, lease_id: int, *, keys: bool = False
    ) -> wire.LeaseTimeToLiveResponse:
        """The lease's remaining TTL (-1 if gone) and, with `keys`, the keys attached."""
        request = wire.LeaseTimeToLiveRequest(ID=lease_id, keys=keys)
        return await self._call(
            "/v3/lease/timetolive", request, wire.LeaseTimeToLiveResponse, write=False
        )

    # -- watch -----------------------------------------------------------------------------

    async def watch(
        self,
        key: Key,
        *,
        prefix: bool = False,
        start_revision: int = 0,
        prev_kv: bool = False,
    ) -> AsyncGenerator[wire.WatchResponse, None]:
        """Stream the changes of a key or prefix from `start_revision` (0: from now on).

        Yields each answer that carries events. The stream lives on one member: when that
        member goes away the iteration raises `EtcdUnavailable`, and the caller reads the
        current state and watches again from there.
        """
        k = wire.as_bytes(key)
        create = wire.WatchCreateRequest(
            key=k,
            range_end=wire.prefix_end(k) if prefix else b"",
            start_revision=start_revision,
            prev_kv=prev_kv,
        )
        payload = msgspec.json.encode(wire.WatchRequest(create_request=create))
        problems: list[str] = []
        for index in range(len(self.endpoints)):
            endpoint = self.endpoints[(self._current + index) % len(self.endpoints)]
            for attempt in range(2 if self.auth is not None else 1):
                try:
                    seen = await self.auth.ensure(self._send, endpoint) if self.auth else 0
                    headers = self.auth.headers() if self.auth else None
                    response = await self._http().post(
                        endpoint + "/v3/watch", data=payload, headers=headers
                    )
                except (aiohttp.ClientError, OSError, EtcdUnavailable) as exc:
                    refused = tls.refusal(exc, endpoint, self.security)
                    if refused is not None:
                        raise refused from None
                    problems.append(f"{endpoint}: {exc!r}")
                    break
                async with response:
                    if response.status != 200:
                        error = wire.gateway_error(await response.read(), response.status)
                        if (
                            self.auth is not None
                            and not attempt
                            and expired(response.status, error)
                        ):
                            await self.auth.renew(self._send, endpoint, seen)
                            continue
                        problems.append(f"{endpoint}: {error.message}")
                        break
                    yielded = False
                    try:
                        async for answer in watch_stream(response, endpoint):
                            yielded = True
                            yield answer
                    except TokenRefused:  # met at the stream's start: nothing was handed on
                        if self.auth is None or attempt or yielded:
                            raise
                        await self.auth.renew(self._send, endpoint, seen)
                        continue
        raise EtcdUnavailable(
            f"etcd watch on {k!r} could not start ({'; '.join(problems)}); check the etcd members"
        )

    async def watch_for(
        self, key: Key, start_revision: int, seconds: float, on_event: Callable[[wire.Event], bool]
    ) -> None:
        """Hand each change of `key` from `start_revision` to `on_event` until it returns
        True, for `seconds` at most; a broken stream ends it early (no error): the caller
        reads the key again and watches from there, which also bounds how long a member
        that hangs can hide a change."""
        with contextlib.suppress(TimeoutError, EtcdError):
            async with asyncio.timeout(seconds):
                stream = self.watch(key, start_revision=start_revision)
                async with contextlib.aclosing(stream):
                    async for answer in stream:
                        for event in answer.events:
                            if on_event(event):
                                return


async def _pause(deadline: float) -> None:
    """A short breath before asking the next member, never past the call's deadline."""
    await asyncio.sleep(min(_RETRY_PAUSE, max(0.0, deadline - time.monotonic())))
