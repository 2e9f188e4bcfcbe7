"""Lockwarden's public Python package: protocol, errors, API declarations, stubs, CLI.

from client import WConfdClient, LuxiClient, AsyncWConfdClient, AsyncLuxiClient, errors
"""

from client import errors
from client.clients import AsyncLuxiClient, AsyncWConfdClient, LuxiClient, WConfdClient

__version__ = "0.1.0"
__all__ = [
    "AsyncLuxiClient",
    "AsyncWConfdClient",
    "LuxiClient",
    "WConfdClient",
    "__version__",
    "errors",
]
