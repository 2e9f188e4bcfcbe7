"""The blocking public stubs (docs/contracts.md#python-client-stubs): WConfdClient and
LuxiClient (asyncio twins in client.aclients).

Their methods come from the API declarations (client.api); this module only adds what
differs per daemon: the socket name and, for wconfd, the identify handshake.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

from client.api.common import CommonApi, Topic
from client.api.luxi import LuxiApi
from client.api.wconfd import Identity, WConfdApi
from client.follow import Following
from client.stubs import DEFAULT_PATIENCE, SyncStub


class _Identifies:
    """The identify handshake every new wconfd connection starts with
    (docs/contracts.md#client-identification).

    Mixed in before SyncStub or AsyncStub, whose __init__ it extends with the identity.
    """

    def __init__(
        self,
        socket_path: str | os.PathLike[str] | None = None,
        *,
        job_id: int | None = None,
        name: str | None = None,
        timeout: float = 60.0,
        patience: float = DEFAULT_PATIENCE,
        expect_daemon: bool = False,
        actor: str | None = None,
    ) -> None:
        if actor is None and job_id is not None:
            actor = f"job:{job_id}"  # a job process acts for its job
        super().__init__(  # type: ignore[call-arg]
            socket_path,
            timeout=timeout,
            patience=patience,
            expect_daemon=expect_daemon,
            actor=actor,
        )
        self.job_id = job_id
        self.name = name
        self.client_id: str | None = None

    def _identify_params(self) -> dict[str, Any] | None:
        # Only identifying clients need it; keeps `import client` light.  The start time
        # as psutil computes it, from one /proc read (a job process identifies at once).
        from client.identity import start_time_of

        pid = os.getpid()
        return {"job_id": self.job_id, "pid": pid, "start_time": start_time_of(pid),
                "name": self.name}  # fmt: skip

    def _on_identified(self, result: Any) -> None:
        assert isinstance(result, Identity)
        self.client_id = result.client_id


class _Follows(CommonApi):
    """How the stubs' follow_events types: an iterator of batches (client.follow), on a
    connection of its own, not the one batch the declaration answers first."""

    if TYPE_CHECKING:

        def follow_events(  # type: ignore[override]
            self, after: int, topics: list[Topic] | None = None, limit: int = 1000
        ) -> Following: ...


class WConfdClient(_Identifies, SyncStub, _Follows, WConfdApi, api=WConfdApi):
    """Blocking wconfd client; connects lazily and identifies as this process."""

    _daemon = "wconfd"


class LuxiClient(SyncStub, _Follows, LuxiApi, api=LuxiApi):
    """Blocking luxid client."""

    _daemon = "luxid"
