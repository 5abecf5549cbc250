"""Real headless Chromium (Debian's package) driven over the DevTools protocol, for layout checks.

Chromium is started with ``--remote-debugging-port=0``; the port it picked is read
from ``DevToolsActivePort`` in its profile folder, and one page target is driven
through aiohttp's websocket client (aiohttp is a pinned dependency already):
``Emulation.setDeviceMetricsOverride`` gives the page a desktop or phone viewport
(``mobile: true`` honours the page's viewport meta, as a phone does),
``Page.navigate`` loads the file, ``Runtime.evaluate`` measures it. No test
skips when Chromium is missing: `.ci/run` installs it.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

START_TIMEOUT = 60.0  # seconds for Chromium to open its debugging port (a busy machine)
STEP_TIMEOUT = 60.0


def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        raise AssertionError("chromium is not installed (apt-get install chromium; .ci/run does it)")
    return path


class Browser:
    """One headless Chromium process and one page."""

    def __init__(self) -> None:
        self.profile = tempfile.TemporaryDirectory(prefix="pykueue-chromium-")
        self.process = subprocess.Popen(
            [
                chromium(),
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--no-first-run",
                "--disable-extensions",
                "--hide-scrollbars",
                "--remote-debugging-port=0",
                f"--user-data-dir={self.profile.name}",
                "about:blank",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        self.port = self._port()
        self.ids = itertools.count(1)
        self.seen: set[str] = set()  # events that arrived while waiting for a reply

    def _port(self) -> int:
        marker = Path(self.profile.name) / "DevToolsActivePort"
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"chromium exited with {self.process.returncode}")
            if marker.exists():
                first = marker.read_text().splitlines()[:1]
                if first and first[0].isdigit():
                    return int(first[0])
            time.sleep(0.1)
        raise AssertionError("chromium did not open its debugging port")

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self.profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def measure(self, url: str, width: int, height: int, mobile: bool, script: str) -> Any:
        """Load ``url`` in a viewport of ``width`` x ``height`` CSS pixels; the value of ``script``."""
        return asyncio.run(self._measure(url, width, height, mobile, script))

    async def _measure(self, url: str, width: int, height: int, mobile: bool, script: str) -> Any:
        async with aiohttp.ClientSession() as session:
            async with session.get(f"http://127.0.0.1:{self.port}/json/list") as response:
                targets = await response.json(content_type=None)
            page = next(t for t in targets if t.get("type") == "page")
            async with session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0) as ws:
                await self._call(ws, "Page.enable")
                await self._call(
                    ws,
                    "Emulation.setDeviceMetricsOverride",
                    width=width,
                    height=height,
                    deviceScaleFactor=1,
                    mobile=mobile,
                )
                self.seen.clear()
                await self._call(ws, "Page.navigate", url=url)
                await self._event(ws, "Page.loadEventFired")
                result = await self._call(
                    ws, "Runtime.evaluate", expression=script, returnByValue=True, awaitPromise=True
                )
                if "exceptionDetails" in result:
                    raise AssertionError(f"the page script failed: {result['exceptionDetails']}")
                return result["result"].get("value")

    async def _call(self, ws: aiohttp.ClientWebSocketResponse, method: str, **params: Any) -> Any:
        ident = next(self.ids)
        await ws.send_str(json.dumps({"id": ident, "method": method, "params": params}))
        while True:
            message = await asyncio.wait_for(ws.receive(), STEP_TIMEOUT)
            if message.type != aiohttp.WSMsgType.TEXT:
                raise AssertionError(f"DevTools connection closed during {method}")
            data = json.loads(message.data)
            if "method" in data:
                self.seen.add(data["method"])
            if data.get("id") == ident:
                if "error" in data:
                    raise AssertionError(f"{method}: {data['error']}")
                return data.get("result", {})

    async def _event(self, ws: aiohttp.ClientWebSocketResponse, name: str) -> None:
        while name not in self.seen:
            message = await asyncio.wait_for(ws.receive(), STEP_TIMEOUT)
            if message.type != aiohttp.WSMsgType.TEXT:
                raise AssertionError(f"DevTools connection closed waiting for {name}")
            method = json.loads(message.data).get("method")
            if method:
                self.seen.add(method)
