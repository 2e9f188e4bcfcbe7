"""Lockwarden's public Python package: protocol, errors, API declarations, stubs, CLI.

    from client import WConfdClient, LuxiClient, AsyncWConfdClient, AsyncLuxiClient, errors

What a client uses lives here: the wire protocol (`protocol`), the typed errors
(`errors`), the API declarations (`api`), the sync and asyncio stubs derived from them,
the wire vocabulary (`vocabulary`), room on nodes (`capacity`), the metric catalogue
(`metrics`), process identity (`identity`) and the `lw` command line (`cli`).  The daemons'
server toolkit is `client._server`: internal, and never imported by client code.

The stubs are imported on first use (PEP 562), so `lw --help` and other light users do
not pay for asyncio, psutil and the stub classes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from client import errors

if TYPE_CHECKING:
    from client.aclients import AsyncLuxiClient, AsyncWConfdClient
    from client.clients import LuxiClient, WConfdClient

__version__ = "0.1.0"
__all__ = [
    "AsyncLuxiClient",
    "AsyncWConfdClient",
    "LuxiClient",
    "WConfdClient",
    "__version__",
    "errors",
]
_STUBS = {
    "AsyncLuxiClient": "client.aclients",
    "AsyncWConfdClient": "client.aclients",
    "LuxiClient": "client.clients",
    "WConfdClient": "client.clients",
}


def __getattr__(name: str) -> Any:
    module = _STUBS.get(name)
    if module is None:
        raise AttributeError(f"module 'client' has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
