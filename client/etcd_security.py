"""How a daemon reaches etcd securely: `--etcd-ca/--etcd-cert/--etcd-key` (TLS) and
`--etcd-user/--etcd-password-file` (etcd's own users), docs/operations.md#etcd-over-tls.

The options and their environment variables are declared once here and taken by
`lw-wconfd`, `lw-luxid` and `lw` (as global options). `EtcdSecurity` is the plain data the
etcd client (`client._server.etcd`) is built from; `security_from_args`
applies the rules that hold before anything connects (a certificate needs its key and a CA,
a user needs a password file) and the daemons join it with `--store`. It lives in the
public package because `lw` takes the options too (public code never imports the toolkit).
"""

from __future__ import annotations

import argparse
import os

import msgspec


class EtcdSecurity(msgspec.Struct, frozen=True):
    """Files and user name for etcd (never the password itself: it is read from its file
    when the client authenticates, so no repr or log of this can show it)."""

    ca: str | None = None
    cert: str | None = None
    key: str | None = None
    user: str | None = None
    password_file: str | None = None

    @property
    def tls(self) -> bool:
        return self.ca is not None


class SecurityError(ValueError):
    """The etcd options contradict each other; the message says what to give."""


_OPTIONS = (
    ("--etcd-ca", "LW_ETCD_CA", "ca", "FILE",
     "reach every etcd member over HTTPS, verifying its certificate (and host name) "
     "against this CA"),
    ("--etcd-cert", "LW_ETCD_CERT", "cert", "FILE",
     "client certificate to present to etcd (--client-cert-auth); it must have no CommonName"),
    ("--etcd-key", "LW_ETCD_KEY", "key", "FILE", "the private key of --etcd-cert"),
    ("--etcd-user", "LW_ETCD_USER", "user", "NAME",
     "authenticate to etcd as this user (etcd auth enabled)"),
    ("--etcd-password-file", "LW_ETCD_PASSWORD_FILE", "password_file", "FILE",
     "file holding --etcd-user's password (its first line); never give a password itself"),
)  # fmt: skip


def add_security_options(parser: argparse.ArgumentParser, *, default: object = None) -> None:
    """The five --etcd-* options, each defaulting to its environment variable (or `default`
    when that is unset, e.g. argparse.SUPPRESS)."""
    group = parser.add_argument_group("etcd security (docs/operations.md#etcd-over-tls)")
    for flag, env, dest, metavar, text in _OPTIONS:
        group.add_argument(
            flag,
            dest=f"etcd_{dest}",
            metavar=metavar,
            default=os.environ.get(env) or default,
            help=f"{text} (default: ${env})",
        )


def security_from_args(args: argparse.Namespace) -> EtcdSecurity:
    """The EtcdSecurity the parsed options give; SecurityError when they are incomplete."""
    values = {dest: getattr(args, f"etcd_{dest}", None) for _, _, dest, _, _ in _OPTIONS}
    security = EtcdSecurity(**values)
    if (security.cert is None) != (security.key is None):
        raise SecurityError("--etcd-cert and --etcd-key go together: give both or neither")
    if security.cert is not None and not security.tls:
        raise SecurityError("--etcd-cert needs --etcd-ca FILE (a client certificate is TLS)")
    if (security.user is None) != (security.password_file is None):
        raise SecurityError(
            "--etcd-user and --etcd-password-file go together: give both or neither"
        )
    for flag, _, dest, _, _ in _OPTIONS:
        path = values[dest] if dest != "user" else None
        if path is not None and not os.access(path, os.R_OK):
            raise SecurityError(f"{flag} {path}: cannot read that file")
    return security


def security_env(security: EtcdSecurity) -> dict[str, str]:
    """The LW_ETCD_* variables that give `security` to a child process (`lw store copy`
    runs the daemons' copy tools so)."""
    values = msgspec.structs.asdict(security)
    return {env: values[dest] for _, env, dest, _, _ in _OPTIONS if values[dest] is not None}


def security_from_env() -> EtcdSecurity:
    """The EtcdSecurity the LW_ETCD_* variables give (checked as the options are)."""
    return security_from_args(
        argparse.Namespace(
            **{f"etcd_{dest}": os.environ.get(env) for _, env, dest, _, _ in _OPTIONS}
        )
    )
