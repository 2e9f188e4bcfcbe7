"""The pure parts of etcd over TLS with etcd's users (docs/operations.md#etcd-over-tls):
store URLs (`etcds://`, no user information, never shown), the --etcd-* option rules, the
argument parser that neither abbreviates nor echoes a password, what counts as an expired
token, and which handshake failures are refusals."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client._server.etcd import tls
from client._server.etcd.auth import TokenAuth, expired
from client._server.etcd.url import parse_store_url, secure_store
from client._server.etcd.wire import GatewayError
from client.argparser import StrictParser
from client.etcd_security import (
    EtcdSecurity,
    SecurityError,
    add_security_options,
    security_from_args,
)


def test_etcds_requires_a_ca_and_turns_endpoints_to_https(tmp_path: Path) -> None:
    url = parse_store_url("etcds://a:1,b:2/lw")
    assert url.tls_required
    with pytest.raises(SecurityError, match=r"^--store etcds://… needs --etcd-ca FILE$"):
        secure_store(url, EtcdSecurity())
    secured = secure_store(url, EtcdSecurity(ca=str(tmp_path / "ca.crt")))
    assert secured.endpoints == ("https://a:1", "https://b:2") and secured.prefix == "/lw"
    plain = secure_store(parse_store_url("etcd://a:1"), EtcdSecurity())
    assert plain.endpoints == ("http://a:1",) and not plain.tls_required


@given(
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=20),
    st.sampled_from(["etcd://", "etcds://"]),
)
def test_user_information_is_refused_without_showing_it(password: str, scheme: str) -> None:
    with pytest.raises(ValueError) as refused:
        parse_store_url(f"{scheme}lockwarden:{password}@10.0.0.1:2379,10.0.0.2:2379/lw")
    message = str(refused.value)
    assert f"'{scheme}10.0.0.1:2379,10.0.0.2:2379/lw' must not carry a user" in message
    assert "lockwarden:" not in message


def _security(argv: list[str]) -> EtcdSecurity:
    parser = StrictParser(prog="t")
    add_security_options(parser)
    return security_from_args(parser.parse_args(argv))


def test_the_option_rules(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_text("x\n")
    full = _security(["--etcd-ca", str(f), "--etcd-cert", str(f), "--etcd-key", str(f),
                      "--etcd-user", "u", "--etcd-password-file", str(f)])  # fmt: skip
    assert full.tls and full.user == "u"
    for argv, text in (
        (["--etcd-ca", str(f), "--etcd-cert", str(f)], "go together"),
        (["--etcd-cert", str(f), "--etcd-key", str(f)], "needs --etcd-ca"),
        (["--etcd-user", "u"], "go together"),
        (["--etcd-ca", str(tmp_path / "missing")], "cannot read"),
    ):
        with pytest.raises(SecurityError, match=text):
            _security(argv)


@pytest.mark.parametrize(
    "argv",
    [
        ["--etcd-password", "hunter2"],
        ["--etcd-password=hunter2"],
        ["--etcd-pass", "hunter2"],
        ["--etcd-secret", "hunter2"],
    ],
)
def test_a_password_option_is_a_usage_error_that_does_not_echo_it(
    argv: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    parser = StrictParser(prog="t")
    add_security_options(parser)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(argv)
    assert exited.value.code == 2
    assert "hunter2" not in capsys.readouterr().err


def test_options_that_say_where_a_password_comes_from_are_options() -> None:
    parser = StrictParser(prog="t")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("add").add_argument("--password-stdin", action="store_true")
    assert parser.parse_args(["add", "--password-stdin"]).password_stdin
    with pytest.raises(SystemExit):  # no abbreviation of a -file option either
        _security(["--etcd-password-fil", "f"])


def test_no_abbreviations_in_subcommands_either() -> None:
    parser = StrictParser(prog="t")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("run").add_argument("--verbose", action="store_true")
    with pytest.raises(SystemExit):
        parser.parse_args(["run", "--verb"])
    assert parser.parse_args(["run", "--verbose"]).verbose


@pytest.mark.parametrize(
    ("status", "error", "renew"),
    [
        (401, GatewayError(code=16, message="etcdserver: invalid auth token"), True),
        (400, GatewayError(code=3, message="auth: revision in header is old"), True),
        (400, GatewayError(code=3, message="etcdserver: revision of auth store is old"), True),
        (403, GatewayError(code=7, message="etcdserver: permission denied"), False),
        (503, GatewayError(code=14, message="etcdserver: no leader"), False),
    ],
)
def test_which_answers_mean_an_expired_token(status: int, error: GatewayError, renew: bool) -> None:
    assert expired(status, error) is renew


def _ssl_error(cls: type[ssl.SSLError], reason: str) -> OSError:
    error = cls(1, reason)
    error.reason = reason
    outer = OSError("connect failed")
    outer.__cause__ = error
    return outer


def test_which_handshake_failures_are_refusals() -> None:
    endpoint = "https://10.0.0.1:2379"
    no_cert, with_cert = EtcdSecurity(ca="c"), EtcdSecurity(ca="c", cert="x", key="y")
    verify = _ssl_error(ssl.SSLCertVerificationError, "CERTIFICATE_VERIFY_FAILED")
    alert = _ssl_error(ssl.SSLError, "SSLV3_ALERT_BAD_CERTIFICATE")
    required = _ssl_error(ssl.SSLError, "TLSV13_ALERT_CERTIFICATE_REQUIRED")
    wrong_version = _ssl_error(ssl.SSLError, "WRONG_VERSION_NUMBER")
    for exc, security, text in (
        (verify, no_cert, "etcd at 10.0.0.1:2379: certificate verify failed"),
        (alert, no_cert, "etcd at 10.0.0.1:2379 requires a client certificate"),
        (required, no_cert, "etcd at 10.0.0.1:2379 requires a client certificate"),
        (alert, with_cert, "etcd at 10.0.0.1:2379 refused the client certificate"),
    ):
        refused = tls.refusal(exc, endpoint, security)
        assert refused is not None and refused.message.startswith(text)
    assert tls.refusal(wrong_version, endpoint, no_cert) is None  # a plain member: not a refusal
    assert tls.refusal(ConnectionRefusedError(), endpoint, no_cert) is None


def test_the_parser_class_is_strict_everywhere() -> None:
    from client._server.runner import new_parser
    from client.cli.main import build_parser

    assert isinstance(new_parser("x", "y"), StrictParser)
    assert isinstance(build_parser(["cluster"]), StrictParser)


def test_one_authentication_serves_every_caller_and_outlives_a_caller_that_gives_up(
    tmp_path: Path,
) -> None:
    password = tmp_path / "password"
    password.write_text("pw\n")
    bodies: list[bytes] = []

    async def post(endpoint: str, path: str, payload: bytes) -> tuple[int, bytes]:
        bodies.append(payload)
        await asyncio.sleep(0.2)  # etcd checking the password
        return 200, b'{"token": "t%d"}' % len(bodies)

    async def scenario() -> None:
        auth = TokenAuth("lockwarden", str(password))
        with pytest.raises(TimeoutError):  # a call whose budget ends meanwhile
            async with asyncio.timeout(0.05):
                await auth.ensure(post, "https://h:1")
        await asyncio.gather(*(auth.ensure(post, "https://h:1") for _ in range(5)))
        assert (auth.token, auth.renewals, len(bodies)) == ("t1", 1, 1)
        # Two callers meet the expiry of token 1: one new token for both.
        await asyncio.gather(auth.renew(post, "https://h:1", 1), auth.renew(post, "https://h:1", 1))
        assert (auth.token, auth.renewals, len(bodies)) == ("t2", 2, 2)
        assert auth.headers() == {"Authorization": "t2"}
        assert b'"password":"pw"' in bodies[0]

    asyncio.run(scenario())
