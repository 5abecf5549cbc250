"""Real headless Chromium (Debian's package) driven over the DevTools protocol, for every web page test.

Chromium is started with ``--remote-debugging-port=0``; the port it picked is read
from ``DevToolsActivePort`` in its profile folder, and one page target is driven
through aiohttp's websocket client (aiohttp is a pinned dependency already):
``Emulation.setDeviceMetricsOverride`` gives the page a desktop or phone viewport
(``mobile: true`` honours the page's viewport meta, as a phone does),
``Page.navigate`` loads the file, ``Runtime.evaluate`` measures it. No test
skips when Chromium is missing: `.ci/run` installs it.

A page stays loaded between calls, on one DevTools connection kept open (an
emulated viewport lasts only as long as the connection that set it), so a test can `load` a live page once, then `evaluate` and
`wait_for` what it shows as it changes, and take a `screenshot`.
"""

from __future__ import annotations

import asyncio
import base64
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
        self.profile = tempfile.TemporaryDirectory(prefix="pykueue-chromium-", ignore_cleanup_errors=True)
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
        self.loop = asyncio.new_event_loop()  # the DevTools connection lives on this loop
        self.session: aiohttp.ClientSession | None = None
        self.ws: aiohttp.ClientWebSocketResponse | None = None

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
        self.loop.run_until_complete(self._disconnect())
        self.loop.close()
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        self._remove_profile()

    def _remove_profile(self) -> None:
        # Chromium's helper processes (crashpad, a renderer on its way out) may still write
        # into the profile for a moment after the browser exited: a full make test once
        # failed here with "Directory not empty". Try again briefly; a leftover temporary
        # folder is not a failure of the page under test.
        for _ in range(20):
            shutil.rmtree(self.profile.name, ignore_errors=True)
            if not Path(self.profile.name).exists():
                break
            time.sleep(0.1)
        self.profile.cleanup()

    def __enter__(self) -> Browser:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def measure(self, url: str, width: int, height: int, mobile: bool, script: str) -> Any:
        """Load ``url`` in a viewport of ``width`` x ``height`` CSS pixels; the value of ``script``."""
        self.load(url, width, height, mobile)
        return self.evaluate(script)

    def load(self, url: str, width: int, height: int, mobile: bool) -> None:
        """Load ``url`` in a viewport of ``width`` x ``height`` CSS pixels and wait for its load event."""
        self.loop.run_until_complete(self._load(url, width, height, mobile))

    def evaluate(self, script: str) -> Any:
        """The value of ``script`` in the loaded page (a promise is awaited)."""
        return self.loop.run_until_complete(self._evaluate(script))

    def wait_for(self, script: str, timeout: float = 30.0, interval: float = 0.2) -> Any:
        """Evaluate ``script`` until its value is truthy (the page changes on its own); fail at the deadline."""
        deadline = time.monotonic() + timeout
        value: Any = None
        while time.monotonic() < deadline:
            value = self.evaluate(script)
            if value:
                return value
            time.sleep(interval)
        raise AssertionError(f"the page did not get there within {timeout}s: {script} was {value!r}")

    def screenshot(self, path: Path) -> None:
        """A PNG of the whole page (beyond the viewport) at ``path``."""
        path.write_bytes(self.loop.run_until_complete(self._screenshot()))

    def png(self) -> bytes:
        """A PNG of the whole page (beyond the viewport), for a test to check."""
        return self.loop.run_until_complete(self._screenshot())

    async def _disconnect(self) -> None:
        if self.ws is not None:
            await self.ws.close()
        if self.session is not None:
            await self.session.close()

    async def _page(self) -> aiohttp.ClientWebSocketResponse:
        """The page's DevTools connection, opened on first use and kept until `close`."""
        if self.ws is None or self.ws.closed:
            self.session = self.session or aiohttp.ClientSession()
            async with self.session.get(f"http://127.0.0.1:{self.port}/json/list") as response:
                targets = await response.json(content_type=None)
            page = next(t for t in targets if t.get("type") == "page")
            self.ws = await self.session.ws_connect(page["webSocketDebuggerUrl"], max_msg_size=0)
        return self.ws

    async def _load(self, url: str, width: int, height: int, mobile: bool) -> None:
        ws = await self._page()
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

    async def _evaluate(self, script: str) -> Any:
        ws = await self._page()
        result = await self._call(
            ws, "Runtime.evaluate", expression=script, returnByValue=True, awaitPromise=True
        )
        if "exceptionDetails" in result:
            raise AssertionError(f"the page script failed: {result['exceptionDetails']}")
        return result["result"].get("value")

    async def _screenshot(self) -> bytes:
        ws = await self._page()
        shot = await self._call(ws, "Page.captureScreenshot", format="png", captureBeyondViewport=True)
        return base64.b64decode(shot["data"])

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
