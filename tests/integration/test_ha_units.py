"""The systemd side of the replicated control plane (docs/contracts.md#replicated-control-plane):
wconfd and luxid read LW_STORE and LW_NODE from /etc/lockwarden/lockwarden.env, and the shipped etcd
drop-in opens TCP for them and nothing else; the daemons take both settings from the environment."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from test_systemd_units import UNIT_DIR, parse_unit

ENV_FILE = "/etc/lockwarden/lockwarden.env"


@pytest.mark.parametrize("name", ["lockwarden-wconfd.service", "lockwarden-luxid.service"])
def test_units_read_the_environment_file(name: str) -> None:
    unit = parse_unit(UNIT_DIR / name)
    # "-": a single-node machine needs no such file.
    assert unit.all("Service", "EnvironmentFile") == [f"-{ENV_FILE}"]


def test_the_etcd_drop_in_only_adds_tcp() -> None:
    drop_in = parse_unit(UNIT_DIR / "lockwarden-etcd.conf")
    assert set(drop_in.words("Service", "RestrictAddressFamilies")) == {
        "AF_UNIX",
        "AF_INET",
        "AF_INET6",
    }
    assert drop_in.sections.keys() == {"Service"}
    assert drop_in.sections["Service"].keys() == {"RestrictAddressFamilies"}


def test_daemons_take_store_and_node_from_the_environment(tmp_path: Path) -> None:
    """What the env file sets is what the daemon uses (its parser's defaults)."""
    code = (
        "from client._server.runner import daemon_parser;"
        "a = daemon_parser('x', 'y').parse_args([]);"
        "print(a.store.endpoints, a.store.prefix, a.node)"
    )
    env = {"LW_STORE": "etcd://10.0.0.1:2379,10.0.0.2:2379/lw", "LW_NODE": "cp1", "PATH": ""}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    assert out.split() == ["('http://10.0.0.1:2379',", "'http://10.0.0.2:2379')", "/lw", "cp1"]
    bad = subprocess.run(
        [sys.executable, "-c", code],
        env={**env, "LW_STORE": "10.0.0.1"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 2 and "does not start with etcd://" in bad.stderr
