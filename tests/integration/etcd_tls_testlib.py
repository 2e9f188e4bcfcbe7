"""A real etcd cluster on loopback with TLS, client-certificate auth and etcd's users on
(docs/operations.md#etcd-over-tls), with certificates made for the test by `lw up --tls`'s
own code (client.cli.up_tls), and what else the refusal tests need: a CA that signed
nothing of the cluster's, a client certificate from it, one with a CommonName, and a wrong
password.

Test files import it after putting this directory on sys.path.
"""

from __future__ import annotations

import contextlib
import shutil
import ssl
import subprocess
from collections.abc import Iterator, Sequence
from pathlib import Path

from etcd_testlib import EtcdCluster

from client.cli.up_tls import USER, TlsFiles, enable_auth, make_files, member_flags
from client.etcd_certs import CertPair, make_ca, make_cert, write_secret
from client.etcd_security import EtcdSecurity

PREFIX = "/lwtls"


class SecureCluster:
    """The cluster, its files and the options a daemon or client needs to use it."""

    def __init__(self, root: Path, size: int, auth_options: Sequence[str]) -> None:
        self.files = make_files(root / "tls", [f"m{i}" for i in range(size)])
        context = ssl.create_default_context(cafile=str(self.files.ca.cert))
        context.load_cert_chain(str(self.files.client.cert), str(self.files.client.key))
        self.cluster = EtcdCluster(
            root,
            size,
            member_options=lambda i: [*member_flags(self.files, i), *auth_options],
            context=context,
        )

    @property
    def endpoints(self) -> list[str]:
        return self.cluster.endpoints

    def store(self, prefix: str = PREFIX) -> str:
        hosts = ",".join(e.removeprefix("https://") for e in self.endpoints)
        return f"etcds://{hosts}{prefix}"

    def security(self, **changes: str | None) -> EtcdSecurity:
        """The daemons' EtcdSecurity (changes replace fields, e.g. cert=None)."""
        f: TlsFiles = self.files
        values: dict[str, str | None] = {
            "ca": str(f.ca.cert),
            "cert": str(f.client.cert),
            "key": str(f.client.key),
            "user": USER,
            "password_file": str(f.password_file),
        }
        values.update(changes)
        return EtcdSecurity(**values)

    def options(self, **changes: str | None) -> list[str]:
        """`--etcd-*` options of `security(**changes)` (None fields left out)."""
        security = self.security(**changes)
        flags = {
            "ca": "--etcd-ca",
            "cert": "--etcd-cert",
            "key": "--etcd-key",
            "user": "--etcd-user",
            "password_file": "--etcd-password-file",
        }
        argv: list[str] = []
        for field, flag in flags.items():
            value = getattr(security, field)
            if value is not None:
                argv += [flag, value]
        return argv

    def foreign(self) -> tuple[CertPair, CertPair]:
        """A CA that signed nothing the cluster knows, and a client certificate from it."""
        directory = self.files.directory / "foreign"
        ca = CertPair(directory / "ca.crt", directory / "ca.key")
        client = CertPair(directory / "client.crt", directory / "client.key")
        if not client.cert.exists():
            make_cert(make_ca(directory), directory, "client")
        return ca, client

    def client_with_cn(self) -> CertPair:
        pair = CertPair(self.files.directory / "with-cn.crt", self.files.directory / "with-cn.key")
        if pair.cert.exists():
            return pair
        return make_cert(self.files.ca, self.files.directory, "with-cn", common_name=USER)

    def wrong_password(self) -> Path:
        return write_secret(self.files.directory / "wrong.password", "not-the-password\n")


@contextlib.contextmanager
def secure_cluster(
    root: Path, size: int = 1, auth_options: Sequence[str] = ()
) -> Iterator[SecureCluster]:
    """A started cluster with TLS, client certificates and auth on (root and the
    `lockwarden` user with readwrite on PREFIX), killed on exit."""
    if shutil.which("openssl") is None:
        import pytest

        pytest.skip("no openssl command to make the test's certificates (Debian: openssl)")
    secure = SecureCluster(root, size, auth_options)
    secure.cluster.start()
    try:
        enable_auth(secure.endpoints[0], secure.files, PREFIX)
        yield secure
    finally:
        secure.cluster.close()


def jwt_options(directory: Path, ttl: str) -> list[str]:
    """etcd options for JWT tokens (ES256, a key made here) that expire after `ttl`
    (e.g. "2s") however often they are used, unlike `simple` ones."""
    directory.mkdir(parents=True, exist_ok=True)
    private, public = directory / "jwt.key", directory / "jwt.pub"
    for argv in (
        ["ecparam", "-name", "prime256v1", "-genkey", "-noout", "-out", str(private)],
        ["ec", "-in", str(private), "-pubout", "-out", str(public)],
    ):
        subprocess.run(["openssl", *argv], check=True, capture_output=True)
    return [
        "--auth-token",
        f"jwt,pub-key={public},priv-key={private},sign-method=ES256,ttl={ttl}",
    ]
