"""The public stubs of SPEC §3.2: WConfdClient, LuxiClient and their asyncio twins.

Their methods come from the API declarations (client.api); this module only adds what
differs per daemon: the socket name and, for wconfd, the identify handshake.
"""

from __future__ import annotations

import os
from typing import Any

import psutil

from client.api.luxi import LuxiApi
from client.api.wconfd import Identity, WConfdApi
from client.stubs import AsyncStub, SyncStub


class _Identifies:
    """The identify handshake every new wconfd connection starts with (SPEC §3.1)."""

    job_id: int | None
    name: str | None
    client_id: str | None

    def _setup_identity(self, job_id: int | None, name: str | None) -> None:
        self.job_id = job_id
        self.name = name
        self.client_id = None

    def _identify_params(self) -> dict[str, Any] | None:
        pid = os.getpid()
        return {
            "job_id": self.job_id,
            "pid": pid,
            "start_time": psutil.Process(pid).create_time(),
            "name": self.name,
        }

    def _on_identified(self, result: Any) -> None:
        assert isinstance(result, Identity)
        self.client_id = result.client_id


class WConfdClient(_Identifies, SyncStub, WConfdApi, api=WConfdApi):
    """Blocking wconfd client; connects lazily and identifies as this process."""

    _daemon = "wconfd"

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        job_id: int | None = None,
        name: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        SyncStub.__init__(self, socket_path, timeout=timeout)
        self._setup_identity(job_id, name)


class AsyncWConfdClient(_Identifies, AsyncStub, api=WConfdApi):
    """asyncio wconfd client; connects lazily and identifies as this process."""

    _daemon = "wconfd"

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        job_id: int | None = None,
        name: str | None = None,
        timeout: float = 60.0,
    ) -> None:
        AsyncStub.__init__(self, socket_path, timeout=timeout)
        self._setup_identity(job_id, name)


class LuxiClient(SyncStub, LuxiApi, api=LuxiApi):
    """Blocking luxid client."""

    _daemon = "luxid"


class AsyncLuxiClient(AsyncStub, api=LuxiApi):
    """asyncio luxid client."""

    _daemon = "luxid"
