"""Ganeti's own RAPI client (`ganeti.rapi.client.GanetiRapiClient`, Debian's
python3-ganeti-rapi) driving a real lw-rapi: the `ganeti` fixture runs a batch of client
calls in a subprocess with the system Python (the client is Python 3 code outside the venv)
and hands back each one's answer.  Shared by the RAPI tests that check Lockwarden works with
that client unchanged (test_rapi_drains, test_rapi_instances); it skips, with the package
to install, where the client is missing.
"""

from __future__ import annotations

import json
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from luxid_testlib import Stack
from test_rapi import ADMIN, Rapi, ganeti_python, self_signed

# Each call is [method, args, kwargs]; each answer {"ok": value} or {"error": code, "message"}.
GANETI_SCRIPT = r"""
import json, sys
from ganeti.rapi import client as rc

port, user, password = int(sys.argv[1]), sys.argv[2], sys.argv[3]
c = rc.GanetiRapiClient("127.0.0.1", port, username=user, password=password)
out = []
for method, args, kwargs in json.loads(sys.argv[4]):
    try:
        out.append({"ok": getattr(c, method)(*args, **kwargs)})
    except rc.GanetiApiError as err:
        out.append({"error": err.code, "message": str(err)})
print(json.dumps(out))
"""

GanetiCall = tuple[str, list[Any], dict[str, Any]]
Ganeti = Callable[..., list[Any]]


@pytest.fixture
def ganeti(stack: Stack, daemon_factory: Any, tmp_path: Path) -> Ganeti:
    """Run calls through Ganeti's RAPI client (HTTPS, as it insists); their answers."""
    python = ganeti_python()
    cert, key = self_signed(tmp_path)
    context = ssl.create_default_context(cafile=str(cert))
    rapi = Rapi(daemon_factory, "--ssl-cert", str(cert), "--ssl-key", str(key), tls=context)

    def call(*calls: GanetiCall) -> list[Any]:
        done = subprocess.run(
            [python, "-c", GANETI_SCRIPT, str(rapi.port), *ADMIN, json.dumps(calls)],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return list(json.loads(done.stdout))

    return call
