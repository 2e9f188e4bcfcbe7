"""TLS to etcd: the client's SSL context and what a failed handshake means
(docs/operations.md#etcd-over-tls).

A failed handshake is never a member being down: the certificate that did not verify, or
the client certificate etcd wanted or refused, stays so on every member and every retry.
`refusal` turns such a failure into an `AccessRefused` whose message says what to fix, so
the client raises it at once instead of trying the next member until its budget runs out.
"""

from __future__ import annotations

import ssl
from urllib.parse import urlsplit

from client._server.etcd.errors import AccessRefused
from client.etcd_security import EtcdSecurity

# etcd's JSON gateway answers a client certificate with a CommonName so (HTTP 400).
CN_REFUSAL = "CommonName of client sending a request against gateway"


def ssl_context(security: EtcdSecurity) -> ssl.SSLContext | None:
    """Verify servers against the CA (host names included), present the client
    certificate when given; None without TLS."""
    if security.ca is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=security.ca)
    if security.cert is not None and security.key is not None:
        context.load_cert_chain(security.cert, security.key)
    return context


def where(endpoint: str) -> str:
    """`H:P` of an endpoint URL, as the messages name a member."""
    return urlsplit(endpoint).netloc


def verify_failed(endpoint: str) -> AccessRefused:
    return AccessRefused(
        f"etcd at {where(endpoint)}: certificate verify failed (is --etcd-ca the CA that "
        "signed the server's certificate?)"
    )


def common_name_refused(endpoint: str) -> AccessRefused:
    return AccessRefused(
        f"etcd at {where(endpoint)} refuses client certificates with a CommonName on its "
        "JSON gateway (make one without CN)"
    )


def refusal(exc: BaseException, endpoint: str, security: EtcdSecurity) -> AccessRefused | None:
    """The AccessRefused a connection failure means, or None for any other failure (a
    member down, a reset, a plain-HTTP member: those are worth another member or a retry)."""
    cause: BaseException | None = exc
    while cause is not None and not isinstance(cause, ssl.SSLError):
        cause = cause.__cause__ or getattr(cause, "os_error", None)
    if cause is None:
        return None
    if isinstance(cause, ssl.SSLCertVerificationError):
        return verify_failed(endpoint)
    reason = (getattr(cause, "reason", None) or str(cause)).upper()
    if "ALERT" not in reason or not ("CERTIFICATE" in reason or "UNKNOWN_CA" in reason):
        return None
    if security.cert is None:
        return AccessRefused(
            f"etcd at {where(endpoint)} requires a client certificate (--etcd-cert, --etcd-key)"
        )
    return AccessRefused(
        f"etcd at {where(endpoint)} refused the client certificate (is --etcd-cert signed by "
        "the CA in etcd's --trusted-ca-file?)"
    )
