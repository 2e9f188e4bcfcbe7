"""`--store etcd://HOST:PORT[,HOST:PORT…][/PREFIX]` (or `LW_STORE`), parsed."""

from __future__ import annotations

import msgspec

DEFAULT_PREFIX = "/lockwarden"
SCHEME = "etcd://"


class EtcdStoreUrl(msgspec.Struct, frozen=True):
    """Where the state lives: the members' client URLs and the key prefix (no trailing /)."""

    endpoints: tuple[str, ...]
    prefix: str = DEFAULT_PREFIX


def parse_store_url(url: str) -> EtcdStoreUrl:
    """Parse an etcd store URL; ValueError with a message saying what to write otherwise."""
    usage = f"write {SCHEME}HOST:PORT[,HOST:PORT…][/PREFIX], e.g. {SCHEME}10.0.0.1:2379,10.0.0.2:2379/lw"
    if not url.startswith(SCHEME):
        raise ValueError(f"store URL {url!r} does not start with {SCHEME}; {usage}")
    hosts, slash, path = url[len(SCHEME) :].partition("/")
    endpoints = []
    for member in hosts.split(","):
        host, colon, port = member.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"store URL {url!r}: {member!r} is not HOST:PORT; {usage}")
        endpoints.append(f"http://{host}:{int(port)}")
    prefix = "/" + path.strip("/") if slash and path.strip("/") else DEFAULT_PREFIX
    return EtcdStoreUrl(endpoints=tuple(endpoints), prefix=prefix)
