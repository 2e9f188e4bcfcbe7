"""`--version` on every console script, run as an operator runs them (the installed scripts
beside this Python): `<prog> <version>` on stdout, exit 0, and the version is the one the
installed package declares (pyproject reads it from client.__version__)."""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys
from pathlib import Path

import pytest

import client

BIN = Path(sys.executable).parent


def test_the_package_version_is_client_version() -> None:
    assert importlib.metadata.version("lockwarden") == client.__version__


@pytest.mark.parametrize("script", ["lw", "lw-wconfd", "lw-luxid", "lw-rapi"])
def test_version_flag_prints_the_version_and_exits_0(script: str) -> None:
    done = subprocess.run(
        [str(BIN / script), "--version"], capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == f"{script} {client.__version__}\n"
    assert done.stderr == ""
