"""etcd over TLS with etcd's own users (docs/operations.md#etcd-over-tls), on a real etcd
member on loopback with TLS, client-certificate auth and auth on, with certificates made by
the test: the daemons serve through it while their tokens expire under them; every
refusal (a CA that did not sign the server, no client certificate, a foreign one, one with a
CommonName, a wrong password) ends wconfd and luxid with exit 1 and its exact text within
10 s, luxid before it opens its socket; expired `simple` tokens are renewed for calls and
for watches without a failed call.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/, for conftest
from conftest import BIN, DaemonProcess
from etcd_tls_testlib import PREFIX, SecureCluster, jwt_options, secure_cluster
from ha_testlib import WconfdNode, wait_master
from luxid_testlib import delay

from client import LuxiClient
from client._server.etcd.client import EtcdClient

pytestmark = pytest.mark.timeout(120)


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureCluster]:
    """One member whose JWT tokens expire every 2 s, used or not."""
    root = tmp_path_factory.mktemp("etcd-tls")
    with secure_cluster(root, 1, jwt_options(root / "jwt", "2s")) as made:
        yield made


@pytest.mark.slow
def test_the_daemons_serve_over_tls_and_auth_while_their_tokens_expire(
    secure: SecureCluster, tmp_path: Path
) -> None:
    options = secure.options()
    wconfd = WconfdNode(tmp_path, "node1", secure.store(), *options).start()
    luxid = DaemonProcess(
        "luxid", tmp_path / "node1", "--store", secure.store(), "--node", "node1", *options
    ).start()
    try:
        term = wait_master([wconfd]).role()["term"]
        jobs = []
        with LuxiClient(luxid.socket, timeout=10) as lc:
            deadline = time.monotonic() + 20
            while True:
                try:
                    lc.query_queue_info()
                    break
                except Exception:
                    if time.monotonic() > deadline:
                        raise
                    time.sleep(0.05)
            end = time.monotonic() + 5  # more than two token lifetimes
            while time.monotonic() < end:
                jobs.append(lc.submit_job(ops=[delay()]))
        assert len(jobs) > 10
        assert wconfd.role()["term"] == term  # the master never lost its lease
        assert wconfd.log().count("etcd user 'lockwarden' authenticated") >= 3  # renewed
        assert "AccessRefused" not in wconfd.log() + luxid.log()
        assert secure.files.password_file.read_text().strip() not in wconfd.log() + luxid.log()
    finally:
        luxid.stop()
        wconfd.stop()


REFUSALS: dict[str, Callable[[SecureCluster], tuple[list[str], str]]] = {
    "foreign CA": lambda s: (
        s.options(ca=str(s.foreign()[0].cert)),
        "certificate verify failed (is --etcd-ca the CA that signed the server's certificate?)",
    ),
    "wrong password": lambda s: (
        s.options(password_file=str(s.wrong_password())),
        "authentication failed for user lockwarden",
    ),
    "no client certificate": lambda s: (
        s.options(cert=None, key=None),
        "requires a client certificate (--etcd-cert, --etcd-key)",
    ),
    "foreign client certificate": lambda s: (
        s.options(cert=str(s.foreign()[1].cert), key=str(s.foreign()[1].key)),
        "refused the client certificate (is --etcd-cert signed by the CA in etcd's "
        "--trusted-ca-file?)",
    ),
    "client certificate with a CommonName": lambda s: (
        s.options(cert=str(s.client_with_cn().cert), key=str(s.client_with_cn().key)),
        "refuses client certificates with a CommonName on its JSON gateway (make one without CN)",
    ),
}


@pytest.mark.parametrize(
    ("daemon", "case"),
    [("wconfd", case) for case in REFUSALS]
    + [("luxid", "no client certificate"), ("luxid", "wrong password")],
)
def test_each_refusal_exits_1_within_10_s_with_its_text(
    secure: SecureCluster, tmp_path: Path, daemon: str, case: str
) -> None:
    options, text = REFUSALS[case](secure)
    where = secure.endpoints[0].removeprefix("https://")
    run, state = tmp_path / "run", tmp_path / "state"
    argv = [str(BIN / f"lw-{daemon}"), "--run-dir", str(run), "--state-dir", str(state)]
    started = time.monotonic()
    done = subprocess.run(
        [*argv, "--store", secure.store(), "--node", "node1", *options],
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert time.monotonic() - started < 10
    assert done.returncode == 1, done.stderr
    separator = ": " if text.startswith(("certificate", "authentication")) else " "
    assert f"etcd at {where}{separator}{text}" in done.stderr
    assert not (run / f"{daemon}.sock").exists()  # refused before it opened its socket
    assert "not-the-password" not in done.stderr


def test_etcds_without_a_ca_and_user_info_in_the_url_are_refused(secure: SecureCluster) -> None:
    lw_wconfd = str(BIN / "lw-wconfd")
    done = subprocess.run(
        [lw_wconfd, "--store", secure.store()], capture_output=True, text=True, timeout=10
    )
    assert done.returncode == 1
    assert "--store etcds://… needs --etcd-ca FILE" in done.stderr
    url = "etcd://lockwarden:s3cret@127.0.0.1:2379/lw"
    done = subprocess.run([lw_wconfd, "--store", url], capture_output=True, text=True, timeout=10)
    assert done.returncode != 0
    assert "'etcd://127.0.0.1:2379/lw' must not carry a user or password" in done.stderr
    assert "s3cret" not in done.stderr
    done = subprocess.run(
        [lw_wconfd, "--etcd-password", "s3cret"], capture_output=True, text=True, timeout=10
    )
    assert done.returncode == 2
    assert "--etcd-password is not an option" in done.stderr
    assert "s3cret" not in done.stderr


def test_expired_simple_tokens_are_renewed_for_calls_and_watches(tmp_path: Path) -> None:
    """`simple` tokens expire after --auth-token-ttl idle seconds: each call after an idle
    spell meets an expired token, which the client renews and the call goes through."""
    with secure_cluster(tmp_path, 1, ["--auth-token", "simple", "--auth-token-ttl", "2"]) as s:

        async def scenario() -> None:
            async with EtcdClient(s.endpoints, security=s.security()) as client:
                assert client.auth is not None
                await client.put(f"{PREFIX}/k", "1")
                assert client.auth.renewals == 1
                await asyncio.sleep(3)  # idle past the token's TTL
                await client.put(f"{PREFIX}/k", "2")
                assert client.auth.renewals == 2
                await asyncio.sleep(3)
                stream = client.watch(f"{PREFIX}/k")
                first = asyncio.ensure_future(anext(stream))
                async with EtcdClient(s.endpoints, security=s.security()) as writer:
                    while not first.done():  # until the watch is in place and sees a put
                        await writer.put(f"{PREFIX}/k", "3")
                        await asyncio.wait([first], timeout=0.2)
                assert first.result().events[0].kv.value == b"3"
                assert client.auth.renewals == 3
                await stream.aclose()

        asyncio.run(scenario())
