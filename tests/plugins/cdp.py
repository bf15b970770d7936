"""A real headless browser for tests: Debian's chromium, driven over the Chrome DevTools
Protocol with aiohttp's websocket client (no browser automation package, nothing fetched).

- ``chromium_binary()``: the chromium on this machine, or None (tests skip, unless
  ``DSV4TUI_REQUIRE_CHROMIUM=1`` -- set by .ci/run -- where they fail instead).
- ``Browser.start(tmp)``: chromium --headless with its own profile dir, every name but
  127.0.0.1 unresolvable (nothing leaves this machine), no background networking.
- ``browser.new_page(fresh=False)`` -> ``Page`` (``fresh``: without the other tabs' cookies): ``goto``, ``evaluate``, ``press(key)``, ``screenshot``,
  ``close``; ``page.terminal_text()`` is what xterm.js shows (its buffer, read through a
  hook installed before the page's own scripts run: xterm's Terminal is not global).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import itertools
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import aiohttp
import pytest

# textual.js does ``this.terminal = new Terminal(...)`` on its own (non-global) object: an
# accessor on Object.prototype sees the assignment, keeps the value as the object's own
# property, and remembers the terminal for the test.
TERMINAL_HOOK = """
window.__dsvTerms = [];
Object.defineProperty(Object.prototype, "terminal", {
  configurable: true,
  set(value) {
    Object.defineProperty(this, "terminal", {value, writable: true, configurable: true,
                                             enumerable: true});
    if (value && value.buffer) window.__dsvTerms.push(value);
  },
  get() { return undefined; },
});
"""

TERMINAL_TEXT = """
(() => {
  const t = (window.__dsvTerms || [])[0];
  if (!t) return "";
  const b = t.buffer.active, out = [];
  for (let i = 0; i < b.length; i++) {
    const line = b.getLine(i);
    if (line) out.push(line.translateToString(true));
  }
  return out.join("\\n");
})()
"""

# key -> (DOM key, code, Windows virtual key code, modifiers: 2 ctrl, 8 shift)
KEYS = {"?": ("?", "Slash", 191, 8), "q": ("q", "KeyQ", 81, 0),
        "escape": ("Escape", "Escape", 27, 0), "ctrl+s": ("s", "KeyS", 83, 2)}


def chromium_binary() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    return None


def need_chromium() -> str:
    found = chromium_binary()
    if found is None:
        if os.environ.get("DSV4TUI_REQUIRE_CHROMIUM") == "1":
            pytest.fail("chromium is required (DSV4TUI_REQUIRE_CHROMIUM=1) but not installed "
                        "(apt-get install chromium)")
        pytest.skip("chromium not installed (apt-get install chromium)")
    return found


class CdpError(RuntimeError):
    pass


class Browser:
    def __init__(self, proc: subprocess.Popen[bytes], ws: Any, session: aiohttp.ClientSession
                 ) -> None:
        self.proc = proc
        self.ws = ws
        self.http = session
        self._ids = itertools.count(1)
        self._waiting: dict[int, asyncio.Future[Any]] = {}
        self.events: list[dict[str, Any]] = []
        self._reader = asyncio.create_task(self._read())

    @classmethod
    async def start(cls, tmp: Path, width: int = 1100, height: int = 700) -> Browser:
        binary = need_chromium()
        profile = tmp / "chromium-profile"
        profile.mkdir(parents=True, exist_ok=True)
        argv = [binary, "--headless=new", "--no-sandbox", "--disable-gpu",
                "--disable-dev-shm-usage", "--remote-debugging-port=0",
                "--remote-debugging-address=127.0.0.1", f"--user-data-dir={profile}",
                "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
                "--disable-background-networking", "--disable-component-update",
                "--disable-sync", "--disable-extensions", "--disable-default-apps",
                "--no-first-run", "--no-default-browser-check", "--metrics-recording-only",
                "--mute-audio", "--hide-scrollbars", f"--window-size={width},{height}",
                "about:blank"]
        proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        port_file = profile / "DevToolsActivePort"
        deadline = time.monotonic() + 30
        while not (port_file.exists() and len(port_file.read_text().split()) >= 2):
            if proc.poll() is not None or time.monotonic() > deadline:
                _kill(proc)
                raise CdpError("chromium did not start its DevTools endpoint")
            await asyncio.sleep(0.05)
        port, path = port_file.read_text().split()[:2]
        session = aiohttp.ClientSession()
        ws = await session.ws_connect(f"ws://127.0.0.1:{port}{path}", max_msg_size=0)
        return cls(proc, ws, session)

    async def _read(self) -> None:
        async for msg in self.ws:
            if msg.type != aiohttp.WSMsgType.TEXT:
                continue
            data = json.loads(msg.data)
            fut = self._waiting.pop(data.get("id", -1), None)
            if fut is not None and not fut.done():
                if "error" in data:
                    fut.set_exception(CdpError(str(data["error"])))
                else:
                    fut.set_result(data.get("result", {}))
            elif "method" in data:
                self.events.append(data)
        for fut in self._waiting.values():
            if not fut.done():
                fut.set_exception(CdpError("the DevTools connection closed"))

    async def send(self, method: str, params: dict[str, Any] | None = None,
                   session: str | None = None, timeout: float = 30.0) -> Any:
        msg_id = next(self._ids)
        fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._waiting[msg_id] = fut
        msg: dict[str, Any] = {"id": msg_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = session
        await self.ws.send_str(json.dumps(msg))
        return await asyncio.wait_for(fut, timeout)

    async def new_page(self, width: int = 1100, height: int = 660, *, fresh: bool = False
                       ) -> Page:
        """A new tab; ``fresh``: in a context of its own (no cookies of the other tabs)."""
        params: dict[str, Any] = {"url": "about:blank"}
        if fresh:
            params["browserContextId"] = (await self.send("Target.createBrowserContext")
                                          )["browserContextId"]
        target = (await self.send("Target.createTarget", params))["targetId"]
        session = (await self.send("Target.attachToTarget",
                                   {"targetId": target, "flatten": True}))["sessionId"]
        page = Page(self, target, session)
        await page.send("Page.enable")
        await page.send("Runtime.enable")
        await page.send("Page.addScriptToEvaluateOnNewDocument", {"source": TERMINAL_HOOK})
        await page.send("Emulation.setDeviceMetricsOverride",
                        {"width": width, "height": height, "deviceScaleFactor": 1,
                         "mobile": False})
        return page

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(self.send("Browser.close"), 5)
        self._reader.cancel()
        with contextlib.suppress(BaseException):
            await self._reader
        with contextlib.suppress(Exception):
            await self.ws.close()
        await self.http.close()
        _kill(self.proc)


class Page:
    def __init__(self, browser: Browser, target: str, session: str) -> None:
        self.browser = browser
        self.target = target
        self.session = session

    async def send(self, method: str, params: dict[str, Any] | None = None) -> Any:
        return await self.browser.send(method, params, self.session)

    async def goto(self, url: str) -> None:
        await self.send("Page.navigate", {"url": url})

    async def evaluate(self, expression: str) -> Any:
        out = await self.send("Runtime.evaluate", {"expression": expression,
                                                   "returnByValue": True})
        if "exceptionDetails" in out:
            raise CdpError(str(out["exceptionDetails"]))
        return out.get("result", {}).get("value")

    async def terminal_text(self) -> str:
        return str(await self.evaluate(TERMINAL_TEXT) or "")

    async def wait_text(self, needle: str, timeout: float = 30.0) -> str:
        deadline = time.monotonic() + timeout
        text = ""
        while time.monotonic() < deadline:
            text = await self.terminal_text()
            if needle in text:
                return text
            await asyncio.sleep(0.2)
        raise AssertionError(f"{needle!r} never showed in the browser's terminal:\n{text}")

    async def press(self, key: str) -> None:
        """A real key press (keyDown with its text, then keyUp) into the focused terminal."""
        name, code, vk, modifiers = KEYS[key]
        down: dict[str, Any] = {"type": "keyDown", "key": name, "code": code,
                                "windowsVirtualKeyCode": vk, "modifiers": modifiers}
        if len(key) == 1:
            down["text"] = key
            down["unmodifiedText"] = key
        await self.send("Input.dispatchKeyEvent", down)
        await self.send("Input.dispatchKeyEvent", {"type": "keyUp", "key": name, "code": code,
                                                   "windowsVirtualKeyCode": vk,
                                                   "modifiers": modifiers})

    async def screenshot(self, path: Path) -> Path:
        data = (await self.send("Page.captureScreenshot", {"format": "png"}))["data"]
        path.write_bytes(base64.b64decode(data))
        return path

    async def close(self) -> None:
        await self.browser.send("Target.closeTarget", {"targetId": self.target})


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(5)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(5)
