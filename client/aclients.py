"""The asyncio public stubs: AsyncWConfdClient and AsyncLuxiClient."""

from __future__ import annotations

from client.api.luxi import LuxiApi
from client.api.wconfd import WConfdApi
from client.astubs import AsyncStub
from client.clients import _Identifies


class AsyncWConfdClient(_Identifies, AsyncStub, api=WConfdApi):
    """asyncio wconfd client; connects lazily and identifies as this process."""

    _daemon = "wconfd"


class AsyncLuxiClient(AsyncStub, api=LuxiApi):
    """asyncio luxid client."""

    _daemon = "luxid"
