"""`lw up --ha N --tls`: the secure etcd path on one machine (docs/operations.md#etcd-over-tls).

`make_files` writes, under `<state dir>/tls/`, a CA, one server certificate per etcd member
(for 127.0.0.1 and localhost), the daemons' client certificate (no CommonName: etcd's JSON
gateway refuses one with it) and the passwords of etcd's `root` and `lockwarden` users
(keys and passwords mode 0600). `member_flags` are the etcd options that turn TLS and
client-certificate auth on; `enable_auth` creates the users and a role that grants
`lockwarden` readwrite on the keys under the prefix only, then turns etcd's auth on: the
daemons never need root. Peer links between the local members stay plain.
"""

from __future__ import annotations

import base64
import json
import secrets
import ssl
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, NamedTuple

from client.cli.context import Failed
from client.etcd_certs import CertError, CertPair, make_ca, make_cert, write_secret

USER = "lockwarden"
ROLE = "lockwarden"


class TlsFiles(NamedTuple):
    """What `make_files` wrote: the daemons use ca, client and password_file."""

    directory: Path
    ca: CertPair
    members: list[CertPair]
    client: CertPair
    password_file: Path
    root_password_file: Path

    def daemon_options(self) -> list[str]:
        """The --etcd-* options that point a daemon at these files."""
        return [
            "--etcd-ca", str(self.ca.cert),
            "--etcd-cert", str(self.client.cert), "--etcd-key", str(self.client.key),
            "--etcd-user", USER, "--etcd-password-file", str(self.password_file),
        ]  # fmt: skip

    def paths(self) -> list[tuple[str, Path]]:
        return [
            ("CA", self.ca.cert),
            ("client certificate", self.client.cert),
            ("client key", self.client.key),
            (f"etcd user {USER}'s password", self.password_file),
            ("etcd user root's password", self.root_password_file),
        ]


def make_files(directory: Path, members: list[str]) -> TlsFiles:
    """Fresh certificates and passwords for `members` (their names) under `directory`."""
    try:
        ca = make_ca(directory)
        servers = [make_cert(ca, directory, m, hosts=("127.0.0.1", "localhost")) for m in members]
        client = make_cert(ca, directory, "client")
    except CertError as exc:
        raise Failed(f"lw up --tls: {exc}") from None
    return TlsFiles(
        directory,
        ca,
        servers,
        client,
        write_secret(directory / f"{USER}.password", secrets.token_urlsafe(24) + "\n"),
        write_secret(directory / "root.password", secrets.token_urlsafe(24) + "\n"),
    )


def member_flags(files: TlsFiles, index: int) -> list[str]:
    """etcd options for member `index`: HTTPS clients, certificates required and checked."""
    pair = files.members[index]
    return [
        "--client-cert-auth", "--trusted-ca-file", str(files.ca.cert),
        "--cert-file", str(pair.cert), "--key-file", str(pair.key),
    ]  # fmt: skip


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _prefix_end(prefix: bytes) -> bytes:
    """The end of the key range of everything starting with `prefix`."""
    trimmed = prefix.rstrip(b"\xff")
    return trimmed[:-1] + bytes([trimmed[-1] + 1])


def client_context(files: TlsFiles) -> ssl.SSLContext:
    """An SSL context that trusts the CA and presents the daemons' client certificate."""
    context = ssl.create_default_context(cafile=str(files.ca.cert))
    context.load_cert_chain(str(files.client.cert), str(files.client.key))
    return context


def _post(endpoint: str, path: str, body: dict[str, Any], context: ssl.SSLContext) -> None:
    request = urllib.request.Request(endpoint + path, data=json.dumps(body).encode())
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as answer:
            answer.read()
    except urllib.error.HTTPError as exc:
        raise Failed(f"etcd {path} failed: {exc.read()[:300].decode(errors='replace')}") from None
    except OSError as exc:
        raise Failed(f"etcd at {endpoint} {path}: {exc}") from None


def _password(path: Path) -> str:
    return path.read_text().splitlines()[0]


def enable_auth(endpoint: str, files: TlsFiles, prefix: str) -> None:
    """Create root and the `lockwarden` user with its role on `prefix`, then enable auth."""
    context = client_context(files)
    key = prefix.encode()
    calls: list[tuple[str, dict[str, Any]]] = [
        ("/v3/auth/role/add", {"name": "root"}),
        ("/v3/auth/user/add", {"name": "root", "password": _password(files.root_password_file)}),
        ("/v3/auth/user/grant", {"user": "root", "role": "root"}),
        ("/v3/auth/role/add", {"name": ROLE}),
        (
            "/v3/auth/role/grant",
            {
                "name": ROLE,
                "perm": {
                    "permType": "READWRITE",
                    "key": _b64(key),
                    "range_end": _b64(_prefix_end(key)),
                },
            },
        ),
        ("/v3/auth/user/add", {"name": USER, "password": _password(files.password_file)}),
        ("/v3/auth/user/grant", {"user": USER, "role": ROLE}),
        ("/v3/auth/enable", {}),
    ]
    for path, body in calls:
        _post(endpoint, path, body, context)
