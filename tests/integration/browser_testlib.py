"""Headless Chromium driven through the DevTools protocol (aiohttp's websocket client).

`--dump-dom` cannot watch a page that keeps a server-sent-event stream open (the page
never finishes loading), so tests drive a real browser tab: navigate, wait for a
JavaScript condition on the rendered DOM, read values, take screenshots at a given size.
Tests import it after putting this directory on sys.path; `chromium_path()` is None where
no Chromium is installed, and the tests skip saying so.
"""

from __future__ import annotations

import asyncio
import base64
import itertools
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import aiohttp

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--remote-debugging-port=0",
    "about:blank",
]


def chromium_path() -> str | None:
    """The Chromium binary, if there is one."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Browser:
    """One Chromium process and its first tab, over CDP."""

    def __init__(self, profile: Path) -> None:
        binary = chromium_path()
        assert binary is not None
        self.profile = profile
        self.proc = subprocess.Popen(
            [binary, f"--user-data-dir={profile}", *FLAGS],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self._ids = itertools.count(1)
        self._session: aiohttp.ClientSession | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None

    async def __aenter__(self) -> Browser:
        port_file = self.profile / "DevToolsActivePort"
        for _ in range(300):
            if port_file.exists() and port_file.read_text().strip():
                break
            if self.proc.poll() is not None:
                raise RuntimeError(f"chromium exited with {self.proc.returncode}")
            await asyncio.sleep(0.05)
        port = int(port_file.read_text().split()[0])
        self._session = aiohttp.ClientSession()
        async with self._session.get(f"http://127.0.0.1:{port}/json") as resp:
            targets = await resp.json(content_type=None)
        page = next(t for t in targets if t["type"] == "page")
        self._ws = await self._session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._ws is not None:
            await self._ws.close()
        if self._session is not None:
            await self._session.close()
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()

    async def send(self, method: str, **params: Any) -> Any:
        """One CDP command's result (events arriving meanwhile are skipped)."""
        assert self._ws is not None
        call_id = next(self._ids)
        await self._ws.send_str(json.dumps({"id": call_id, "method": method, "params": params}))
        while True:
            message = json.loads((await self._ws.receive(timeout=30)).data)
            if message.get("id") == call_id:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message.get("result", {})

    async def open(self, url: str, headers: dict[str, str] | None = None) -> None:
        """Load `url` in the tab (with extra request headers, e.g. Authorization)."""
        await self.send("Network.enable")
        if headers:
            await self.send("Network.setExtraHTTPHeaders", headers=headers)
        await self.send("Page.navigate", url=url)

    async def evaluate(self, expression: str) -> Any:
        """A JavaScript expression's value in the page."""
        result = await self.send("Runtime.evaluate", expression=expression, returnByValue=True)
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def wait_for(self, expression: str, timeout: float = 15.0) -> Any:
        """Wait until a JavaScript expression is truthy; its value."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            value = await self.evaluate(expression)
            if value:
                return value
            if loop.time() > deadline:
                page = await self.evaluate("document.body ? document.body.innerText : ''")
                raise TimeoutError(f"not true within {timeout} s: {expression}\npage:\n{page}")
            await asyncio.sleep(0.05)

    async def screenshot(self, path: Path, width: int, height: int, mobile: bool = False) -> None:
        """A PNG of the viewport at width x height (a phone's when `mobile`)."""
        await self.send(
            "Emulation.setDeviceMetricsOverride",
            width=width,
            height=height,
            deviceScaleFactor=2 if mobile else 1,
            mobile=mobile,
        )
        # The page must fit the width: a wider layout viewport means something overflows.
        await self.wait_for(f"window.innerWidth === {width}")
        await self.send(  # two animation frames: the layout at the new size is painted
            "Runtime.evaluate",
            expression="new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))",
            awaitPromise=True,
        )
        shot = await self.send("Page.captureScreenshot", format="png")
        path.write_bytes(base64.b64decode(shot["data"]))
