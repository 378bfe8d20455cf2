"""A headless Chromium the tests can look into: evaluate JavaScript in the page and take
screenshots, through the DevTools protocol on a loopback port (aiohttp's websocket client)."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp

from framework_plugins.fighter.browser import CHROMIUM_FLAGS, CHROMIUM_NAMES
from tests.conftest import chromium_env, free_port, require_tool


class InspectedPage:
    """`url` in a headless Chromium of its own (a fresh profile), with a DevTools port."""

    def __init__(self, url: str, *, width: int = 1280, height: int = 800) -> None:
        found = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None) or require_tool("chromium")
        self.profile = Path(tempfile.mkdtemp(prefix="framework-test-chromium-"))
        self.port = free_port()
        self.process = subprocess.Popen(
            [found, *CHROMIUM_FLAGS, f"--user-data-dir={self.profile}",
             f"--remote-debugging-port={self.port}", "--remote-debugging-address=127.0.0.1",
             f"--window-size={width},{height}", url],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
            start_new_session=True, env=chromium_env(),
        )  # fmt: skip
        self._ws_url = self._page_socket(timeout=30)
        self._id = 0

    def _page_socket(self, timeout: float) -> str:
        import urllib.request

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError):  # not listening yet
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json", timeout=2) as r:
                    pages = [t for t in json.load(r) if t.get("type") == "page"]
                if pages:
                    return str(pages[0]["webSocketDebuggerUrl"])
            time.sleep(0.2)
        raise TimeoutError("Chromium's DevTools did not answer")

    def _command(self, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        self._id += 1
        call = {"id": self._id, "method": method, "params": params or {}}

        async def send() -> dict[str, Any]:
            async with (
                aiohttp.ClientSession() as session,
                session.ws_connect(self._ws_url, max_msg_size=0) as ws,
            ):
                await ws.send_json(call)
                async for message in ws:
                    data = json.loads(message.data)
                    if data.get("id") == call["id"]:
                        return data
            raise ConnectionError("DevTools closed the connection")

        reply = asyncio.run(asyncio.wait_for(send(), 30))
        if "error" in reply:
            raise RuntimeError(f"DevTools {method}: {reply['error']}")
        return dict(reply["result"])

    def evaluate(self, expression: str) -> Any:
        """The JSON value of a JavaScript expression in the page."""
        result = self._command("Runtime.evaluate", {"expression": expression, "returnByValue": True})
        if "exceptionDetails" in result:
            raise RuntimeError(f"{expression}: {result['exceptionDetails']}")
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = self.evaluate(expression)
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"{expression} stayed falsy for {timeout} s")
            time.sleep(0.1)

    def wait_in_page(self, condition: str, timeout: float = 30) -> None:
        """Wait for the JavaScript `condition` to hold, checked by the page itself ten times a second
        (an exception in it counts as not yet): one DevTools call per 10 s, where `wait_for` connects
        ten times a second (each connection is CPU that a page loading on a loaded machine lacks)."""
        check = (
            "new Promise(done => { const until = Date.now() + 10000; (function check() {"
            f" let held = false; try {{ held = Boolean({condition}); }} catch (e) {{}}"
            " if (held || Date.now() > until) done(held); else setTimeout(check, 100); })(); })"
        )
        deadline = time.monotonic() + timeout
        while True:
            try:
                reply = self._command(
                    "Runtime.evaluate", {"expression": check, "awaitPromise": True, "returnByValue": True}
                )
                if reply["result"].get("value"):
                    return
            except RuntimeError:  # the page's document replaced as it loads: asked again in the new one
                time.sleep(0.1)
            if time.monotonic() > deadline:
                raise AssertionError(f"{condition} stayed false for {timeout} s")

    def steady(self, expression: str, timeout: float = 30) -> Any:
        """The value of `expression` once two reads 0.3 s apart agree (a table laid out after its
        rows appear), within `timeout`."""
        deadline = time.monotonic() + timeout
        last = self.evaluate(expression)
        while True:
            time.sleep(0.3)
            now = self.evaluate(expression)
            if now == last:
                return now
            if time.monotonic() > deadline:
                raise AssertionError(f"{expression} kept changing for {timeout} s")
            last = now

    def screenshot(self, path: Path) -> Path:
        data = self._command("Page.captureScreenshot", {"format": "png"})["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    def close(self) -> None:
        import os
        import signal

        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)
