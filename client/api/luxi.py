"""The luxid API (SPEC §6.2): declared once, served by luxid, called by the stubs."""

from __future__ import annotations

from client.api.common import CommonApi


class LuxiApi(CommonApi):
    """The job queue."""
