"""The wconfd API (SPEC §3.1, §4, §5): declared once, served by wconfd, called by the stubs."""

from __future__ import annotations

import msgspec

from client.api.common import CommonApi
from client.api.declare import rpc
from client.errors import IdentityMismatch, InvalidParams


class Identity(msgspec.Struct, frozen=True):
    """What `identify` answers: the stable id locks and reservations belong to."""

    client_id: str


class WConfdApi(CommonApi):
    """Configuration and locks."""

    @rpc(IdentityMismatch, InvalidParams, identified=False)
    def identify(
        self, job_id: int | None, pid: int, start_time: float, name: str | None = None
    ) -> Identity:
        """Say who this connection is: a job id or a name, the pid and its start time.

        Must come first on every connection.  The daemon checks the pid against the
        socket peer and the start time against its own reading (within 1 s).
        """
