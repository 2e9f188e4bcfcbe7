"""`--store etcd[s]://HOST:PORT[,HOST:PORT…][/PREFIX]` (or `LW_STORE`), parsed.

`etcds://` is `etcd://` with TLS required (docs/operations.md#etcd-over-tls). A URL never
carries a user or password (`etcd://u:pw@h:p` is refused, and the message shows the URL
without them): those come from `--etcd-user` and `--etcd-password-file`.
"""

from __future__ import annotations

import msgspec

from client.etcd_security import EtcdSecurity, SecurityError

DEFAULT_PREFIX = "/lockwarden"
SCHEME = "etcd://"
TLS_SCHEME = "etcds://"


class EtcdStoreUrl(msgspec.Struct, frozen=True):
    """Where the state lives: the members' client URLs and the key prefix (no trailing /);
    how to reach them (`security`, attached by `secure_store`)."""

    endpoints: tuple[str, ...]
    prefix: str = DEFAULT_PREFIX
    tls_required: bool = False
    security: EtcdSecurity = EtcdSecurity()


def parse_store_url(url: str) -> EtcdStoreUrl:
    """Parse an etcd store URL; ValueError with a message saying what to write otherwise."""
    usage = f"write {SCHEME}HOST:PORT[,HOST:PORT…][/PREFIX], e.g. {SCHEME}10.0.0.1:2379,10.0.0.2:2379/lw"
    scheme = next((s for s in (SCHEME, TLS_SCHEME) if url.startswith(s)), None)
    if scheme is None:
        raise ValueError(f"store URL {url!r} does not start with {SCHEME} or {TLS_SCHEME}; {usage}")
    if "@" in url:  # user information, perhaps with a password holding / or , or @
        shown = scheme + url.rpartition("@")[2]
        raise ValueError(
            f"store URL {shown!r} must not carry a user or password: give --etcd-user NAME "
            "and --etcd-password-file FILE"
        )
    hosts, slash, path = url[len(scheme) :].partition("/")
    endpoints = []
    for member in hosts.split(","):
        host, colon, port = member.strip().rpartition(":")
        if not colon or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"store URL {url!r}: {member!r} is not HOST:PORT; {usage}")
        endpoints.append(f"http://{host}:{int(port)}")
    prefix = "/" + path.strip("/") if slash and path.strip("/") else DEFAULT_PREFIX
    return EtcdStoreUrl(
        endpoints=tuple(endpoints), prefix=prefix, tls_required=scheme == TLS_SCHEME
    )


def secure_store(url: EtcdStoreUrl, security: EtcdSecurity) -> EtcdStoreUrl:
    """`url` with `security` attached and its endpoints over https when TLS is on;
    SecurityError for `etcds://` without a CA."""
    if url.tls_required and not security.tls:
        raise SecurityError(f"--store {TLS_SCHEME}… needs --etcd-ca FILE")
    scheme = "https://" if security.tls else "http://"
    endpoints = tuple(scheme + e.split("://", 1)[1] for e in url.endpoints)
    return msgspec.structs.replace(url, endpoints=endpoints, security=security)
