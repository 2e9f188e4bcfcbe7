"""`lw up --ha 3 --tls` (docs/operations.md#etcd-over-tls): the local etcd members serve over
TLS and want client certificates, etcd's auth is on, the files are made under
`<state>/tls/` (keys and passwords 0600, the client certificate without CommonName) and
printed, and the nodes run on them as the `lockwarden` user, whose role covers the prefix
only."""

from __future__ import annotations

import asyncio
import re
import shutil
import signal
import stat
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import psutil
import pytest

sys.path.insert(0, str(Path(__file__).parent))
from etcd_testlib import require_etcd

from client import LuxiClient, WConfdClient, errors
from client._server.etcd.client import EtcdClient
from client._server.etcd.errors import AccessRefused, EtcdRequestError
from client.etcd_security import EtcdSecurity

pytestmark = [pytest.mark.timeout(180), pytest.mark.slow]

BIN = Path(sys.executable).parent
T = TypeVar("T")


def _wait_for(text: str, out: Path, proc: subprocess.Popen[bytes], seconds: float) -> str:
    deadline = time.monotonic() + seconds
    while text not in out.read_text():
        assert proc.poll() is None and time.monotonic() < deadline, out.read_text()
        time.sleep(0.1)
    return out.read_text()


def test_lw_up_ha_tls_runs_the_nodes_on_a_secured_etcd(tmp_path: Path) -> None:
    require_etcd()
    if shutil.which("openssl") is None:
        pytest.skip("no openssl command: lw up --tls makes its certificates with it")
    out_path, run, state = tmp_path / "up.out", tmp_path / "run", tmp_path / "state"
    with open(out_path, "w") as out:
        proc = subprocess.Popen(
            [str(BIN / "lw"), "up", "--ha", "3", "--tls", "--run-dir", str(run),
             "--state-dir", str(state), "--log-level", "WARNING"],
            stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip
    try:
        text = _wait_for("running; Ctrl-C stops everything", out_path, proc, 90)
        tls = state / "tls"
        for line in ("CA: ", "client certificate: ", "client key: ", "password: "):
            assert f"{line}{tls}/" in text
        for private in (*tls.glob("*.key"), *tls.glob("*.password")):
            assert stat.S_IMODE(private.stat().st_mode) == 0o600, private
        subject = subprocess.run(
            ["openssl", "x509", "-in", str(tls / "client.crt"), "-noout", "-subject"],
            capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
        assert "CN" not in subject
        endpoints = re.findall(r"etcd\d\s+ready on (https://127\.0\.0\.1:\d+)", text)
        assert len(endpoints) == 3
        daemons = [c for c in psutil.Process(proc.pid).children() if "etcd" not in c.name()]
        assert len(daemons) == 6
        for daemon in daemons:
            assert "--etcd-user" in daemon.cmdline() and "lockwarden" in daemon.cmdline()

        with WConfdClient(run / "node1" / "wconfd.sock", name="probe") as wc:
            master = _eventually(lambda: wc.get_role().master, 30, "a master")
        with LuxiClient(run / master / "luxid.sock") as lc:
            _eventually(lambda: _serving(lc), 15, "the master's luxid serving")
            assert lc.submit_job(ops=[{"OP_ID": "OP_TEST_DELAY", "duration": 0}]) >= 1
        asyncio.run(_only_the_prefix_and_only_with_a_certificate(endpoints, tls))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _eventually(probe: Callable[[], T | None], seconds: float, what: str) -> T:
    """`probe()`'s first answer that is not None (or False), polled for `seconds`."""
    deadline = time.monotonic() + seconds
    while not (answer := probe()):
        assert time.monotonic() < deadline, f"no {what} within {seconds} s"
        time.sleep(0.05)
    return answer


def _serving(lc: LuxiClient) -> bool | None:
    try:
        lc.query_queue_info()
    except errors.NotMaster:
        return None
    return True


async def _only_the_prefix_and_only_with_a_certificate(endpoints: list[str], tls: Path) -> None:
    user = EtcdSecurity(
        ca=str(tls / "ca.crt"), cert=str(tls / "client.crt"), key=str(tls / "client.key"),
        user="lockwarden", password_file=str(tls / "lockwarden.password"),
    )  # fmt: skip
    async with EtcdClient(endpoints, security=user) as client:
        assert (await client.range(b"/lockwarden/", prefix=True, count_only=True)).count > 0
        with pytest.raises(EtcdRequestError, match="permission denied"):
            await client.put(b"/elsewhere", b"x")
    no_cert = EtcdSecurity(ca=user.ca, user=user.user, password_file=user.password_file)
    async with EtcdClient(endpoints, security=no_cert) as client:
        with pytest.raises(AccessRefused, match="requires a client certificate"):
            await client.check_access("/lockwarden")
