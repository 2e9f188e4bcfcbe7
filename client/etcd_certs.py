"""Certificates for etcd over TLS on one machine: a CA, member (server) certificates and
client certificates, made with the `openssl` command (docs/operations.md#etcd-over-tls).

`lw up --ha N --tls` and the tests of the secure path use them; production brings its own
PKI. Client certificates carry no CommonName on purpose: etcd's JSON gateway, which the
daemons speak, refuses a client certificate with one. Every key is written mode 0600.
Keys are ECDSA P-256 (fast to make, accepted by every etcd 3.x).
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import NamedTuple

DAYS = 825
_KEY = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes"]


class CertError(Exception):
    """A certificate could not be made (no openssl, or it failed): the message says why."""


class CertPair(NamedTuple):
    cert: Path
    key: Path


def _openssl(*argv: str) -> None:
    binary = shutil.which("openssl")
    if binary is None:
        raise CertError("making TLS certificates needs the openssl command (Debian: openssl)")
    done = subprocess.run([binary, *argv], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise CertError(f"openssl {argv[0]} failed: {done.stderr.strip()[-500:]}")


def _private(path: Path) -> None:
    os.chmod(path, 0o600)


def make_ca(directory: Path, name: str = "lockwarden-etcd-ca") -> CertPair:
    """A self-signed CA (`ca.crt`, `ca.key`) in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    pair = CertPair(directory / "ca.crt", directory / "ca.key")
    _openssl(
        "req", "-x509", *_KEY, "-keyout", str(pair.key), "-out", str(pair.cert),
        "-days", str(DAYS), "-subj", f"/CN={name}",
        "-addext", "basicConstraints=critical,CA:TRUE",
        "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    _private(pair.key)
    return pair


def make_cert(
    ca: CertPair,
    directory: Path,
    name: str,
    *,
    hosts: tuple[str, ...] = (),
    common_name: str | None = None,
) -> CertPair:
    """`name.crt`/`name.key` signed by `ca`, for both server and client use.

    `hosts` become the subject alternative names (IP addresses or DNS names); the subject
    is `O=lockwarden` plus `CN=common_name` only when one is given."""
    directory.mkdir(parents=True, exist_ok=True)
    pair = CertPair(directory / f"{name}.crt", directory / f"{name}.key")
    subject = "/O=lockwarden" + (f"/CN={common_name}" if common_name else "")
    lines = [
        "basicConstraints=critical,CA:FALSE",
        "keyUsage=critical,digitalSignature,keyEncipherment",
        "extendedKeyUsage=serverAuth,clientAuth",
    ]
    if hosts:
        alt = ",".join(f"IP:{h}" if _is_ip(h) else f"DNS:{h}" for h in hosts)
        lines.append(f"subjectAltName={alt}")
    with tempfile.TemporaryDirectory() as tmp:
        csr, ext = Path(tmp) / "req.csr", Path(tmp) / "ext.cnf"
        ext.write_text("\n".join(lines) + "\n")
        _openssl("req", "-new", *_KEY, "-keyout", str(pair.key), "-out", str(csr), "-subj", subject)
        _private(pair.key)
        _openssl(
            "x509", "-req", "-in", str(csr), "-CA", str(ca.cert), "-CAkey", str(ca.key),
            "-set_serial", str(secrets.randbits(63)), "-days", str(DAYS),
            "-extfile", str(ext), "-out", str(pair.cert),
        )  # fmt: skip
    return pair


def write_secret(path: Path, text: str) -> Path:
    """Write `text` to `path`, readable by its owner only (created so, never world-readable)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    _private(path)
    return path


def _is_ip(host: str) -> bool:
    return host.replace(".", "").isdigit() or ":" in host
