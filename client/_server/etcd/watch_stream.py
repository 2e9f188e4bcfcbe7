"""One etcd watch stream over the gRPC gateway (client._server.etcd.client.watch): its
answers, one JSON document per line, and what ends it (a broken or cancelled stream, a
token etcd no longer takes)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp

from client._server.etcd import wire
from client._server.etcd.auth import expired
from client._server.etcd.errors import EtcdRequestError, EtcdUnavailable


async def watch_stream(
    response: aiohttp.ClientResponse, endpoint: str
) -> AsyncIterator[wire.WatchResponse]:
    """The answers of one watch stream, one JSON document per line."""
    try:
        async for line in response.content:
            if not line.strip():
                continue
            message = wire.decode(line, wire.WatchMessage)
            if message.error is not None:
                failure = TokenRefused if expired(0, message.error) else EtcdUnavailable
                raise failure(f"etcd watch on {endpoint} failed: {message.error.message}")
            answer = message.result
            if answer is None or (answer.created and not answer.events and not answer.canceled):
                continue
            reason = answer.cancel_reason
            if answer.canceled and ("permission denied" in reason or _expired_text(reason)):
                # etcd cancels a watch whose token it no longer takes this way too
                raise TokenRefused(f"etcd refused the watch on {endpoint}: {reason}")
            if answer.canceled:
                raise EtcdRequestError(
                    f"etcd cancelled the watch on {endpoint}: {answer.cancel_reason or 'compacted'}"
                    f" (compacted up to revision {answer.compact_revision}); read again and "
                    "watch from the current revision",
                    11,
                )
            yield answer
    except (aiohttp.ClientError, OSError) as exc:
        raise EtcdUnavailable(f"etcd watch stream from {endpoint} broke: {exc!r}") from exc
    raise EtcdUnavailable(f"etcd watch stream from {endpoint} ended")


def _expired_text(reason: str) -> bool:
    return expired(0, wire.GatewayError(message=reason))


class TokenRefused(EtcdUnavailable):
    """A watch stream refused at its start for the token: renew it and watch again."""
