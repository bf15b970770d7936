"""``dsv4tui serve``: the dashboard in a real headless chromium, behind its token.

A real ``dsv4tui serve demo`` (textual-serve on 127.0.0.1, a subprocess), real HTTP and
websocket requests, Debian's chromium over the DevTools protocol (tests/plugins/cdp.py):
the page loads, the demo dashboard draws with its SIMULATED badge, ``?`` reaches the app
(Help opens), a request without the token is refused (403, page and websocket), closing the
tab ends that tab's dashboard process, Ctrl-C on serve leaves no process behind, and a
SIGKILLed serve's tabs end by themselves, their agents with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
import pytest
from plugins.cdp import Browser
from plugins.sim import free_port, subprocess_env

from dsv4tui.main import main
from dsv4tui.tui.commands import serve

pytestmark = pytest.mark.timeout(120)


@dataclass
class Served:
    proc: subprocess.Popen[str]
    port: int
    url: str = ""
    lines: list[str] = field(default_factory=list)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return self.url.split("token=", 1)[1]

    def tabs(self) -> list[int]:
        """The serve process's children that are a tab's dashboard."""
        found = []
        for pid in serve.children(self.proc.pid):
            try:
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if b"--tab" in cmd:
                found.append(pid)
        return found


def _wait(what: str, check: object, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not check():  # type: ignore[operator]
        assert time.monotonic() < deadline, what
        time.sleep(0.1)


@pytest.fixture
def served(tmp_path: Path) -> Iterator[Served]:
    port = free_port()
    env = subprocess_env(DSV4TUI_DEMO_PORT=str(free_port()))
    err = open(tmp_path / "serve.err", "w")  # noqa: SIM115 - closed at teardown
    proc = subprocess.Popen([sys.executable, "-m", "dsv4tui", "serve", "demo", "--port",
                             str(port), "--no-start"], stdout=subprocess.PIPE, stderr=err,
                            text=True, env=env, start_new_session=True)
    s = Served(proc, port)

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            s.lines.append(line.rstrip("\n"))

    threading.Thread(target=read, daemon=True).start()
    try:
        _wait(f"serve printed no URL: {s.lines}", lambda: any("token=" in x for x in s.lines)
              or proc.poll() is not None, 60)
        assert proc.poll() is None, (tmp_path / "serve.err").read_text()
        s.url = next(x.strip() for x in s.lines if "token=" in x)
        yield s
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(5)
        err.close()


def test_the_url_carries_a_token_and_nothing_answers_without_it(served: Served) -> None:
    assert re.fullmatch(rf"http://127\.0\.0\.1:{served.port}/\?token=[A-Za-z0-9_-]{{32}}",
                        served.url)
    assert sum("token=" in line for line in served.lines) == 1  # printed once

    async def go() -> None:
        async with aiohttp.ClientSession() as http:
            for path in ("/", "/?token=wrong", f"/?token={served.token}x", "/download/abc"):
                async with http.get(served.base + path) as r:
                    assert r.status == 403, path
                    assert "needs its token" in await r.text()
            for path in ("/ws", "/ws?token=wrong"):
                with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
                    await http.ws_connect(served.base + path)
                assert exc.value.status == 403, path
            async with http.get(served.base + "/static/js/textual.js") as r:
                assert r.status == 200  # textual-serve's own script: open
            async with http.get(served.url) as r:
                assert r.status == 200
                page = await r.text()
                assert r.headers["Referrer-Policy"] == "no-referrer"
                cookie = r.cookies
            assert f"ws://127.0.0.1:{served.port}/ws" in page
            # through a port-forward the browser's address is another: the page follows it
            async with http.get(served.url, headers={"Host": "127.0.0.1:9000"}) as r:
                assert r.status == 200 and "ws://127.0.0.1:9000/ws" in await r.text()
            [morsel] = cookie.values()
            assert morsel.value == served.token and morsel["httponly"]
            assert morsel["samesite"] == "Strict"
            # the page's cookie, from another site's page: refused before the upgrade
            with pytest.raises(aiohttp.WSServerHandshakeError) as exc:
                await http.ws_connect(served.base + "/ws",
                                      headers={"Origin": "http://evil.example"})
            assert exc.value.status == 403

    asyncio.run(go())
    assert served.tabs() == []  # nothing refused ever started a dashboard


def test_the_page_asks_nothing_of_another_host_and_names_its_host(served: Served) -> None:
    """An air-gapped GPU box has no fonts.googleapis.com: every URL on the page is ours
    (and answers), and the tab's title names the host, not the token-bearing URL."""

    async def go() -> None:
        async with aiohttp.ClientSession() as http:
            async with http.get(served.url) as r:
                assert r.status == 200
                page = await r.text()
            assert re.search(r"<title>dsv4tui demo</title>", page)
            urls = re.findall(r"""(?:https?|wss?)://[^\s"'<>)]+""", page)
            assert urls and all(u.split("/")[2] == f"127.0.0.1:{served.port}" for u in urls), urls
            assert not re.search(r"(?<![\w.])//[a-z]", page.replace("://", ""))  # no //host/...
            fonts = [u for u in urls if u.endswith(".ttf")]
            assert fonts
            for url in (u for u in urls if "/static/" in u):
                async with http.get(url) as r:
                    assert r.status == 200, url

    asyncio.run(go())


async def test_the_dashboard_in_chromium(served: Served, tmp_path: Path) -> None:
    browser = await Browser.start(tmp_path)
    try:
        page = await browser.new_page()
        await page.goto(served.url)
        text = await page.wait_text("SIMULATED", 60)
        assert "demo" in text
        assert len(served.tabs()) == 1  # one dashboard process for the tab
        await page.wait_text("RTX PRO 6000", 30)  # the simulated GPUs' first frame
        shot = await page.screenshot(tmp_path / "serve-demo.png")
        assert shot.stat().st_size > 10_000
        if os.environ.get("DSV4TUI_SCREENSHOT_DIR"):  # docs/serve-demo.png is made so
            shutil.copy(shot, Path(os.environ["DSV4TUI_SCREENSHOT_DIR"]) / shot.name)
        await page.evaluate("document.querySelector('.xterm-helper-textarea').focus()")
        await page.press("?")
        await page.wait_text("remap keys in the config", 20)  # Help's foot line
        await page.press("escape")
        deadline = time.monotonic() + 10  # escape alone (not alt+ the next key), Help closed
        while "remap keys in the config" in await page.terminal_text():
            assert time.monotonic() < deadline, "escape did not close Help"
            await asyncio.sleep(0.1)
        await page.press("ctrl+s")  # the screen as SVG, on the serving machine
        shots = Path(os.environ["DSV4TUI_DATA_DIR"]) / "screenshots"
        await asyncio.to_thread(_wait, "ctrl+s saved no screenshot",
                                lambda: any(shots.glob("dsv4tui-dashboard-*.svg")), 20)
        await page.wait_text("screen saved to", 10)
        [tab] = served.tabs()
        await page.close()
        await asyncio.to_thread(_wait, "closing the tab left its dashboard running",
                                lambda: tab not in served.tabs(), 20)
        # a browser that never had the token (no URL, no cookie): the 403 page, no dashboard
        other = await browser.new_page(fresh=True)
        await other.goto(served.base + "/")
        deadline = time.monotonic() + 10
        body = ""
        while "needs its token" not in body and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            body = str(await other.evaluate("document.body ? document.body.innerText : ''"))
        assert "403" in body and "needs its token" in body
        await asyncio.sleep(0.5)
        assert served.tabs() == []
        # a tab open when serve stops: its dashboard goes with it
        again = await browser.new_page()
        await again.goto(served.url)
        await again.wait_text("SIMULATED", 60)
        assert len(served.tabs()) == 1
        served.proc.send_signal(signal.SIGINT)
        await asyncio.to_thread(served.proc.wait, 30)
        assert serve.children(served.proc.pid) == []
    finally:
        await browser.close()


def _descendants(pid: int) -> list[int]:
    found = []
    for child in serve.children(pid):
        found += [child, *_descendants(child)]
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def test_a_killed_serve_takes_its_tabs_and_their_agents_along(served: Served) -> None:
    """SIGKILL gives serve no time to end anything: each tab notices its parent is gone and
    ends, and its agents with it."""

    async def go() -> list[int]:
        async with aiohttp.ClientSession() as http:
            async with http.get(served.url) as r:
                assert r.status == 200
            ws = await http.ws_connect(f"{served.base}/ws?width=120&height=40&token="
                                       f"{served.token}")
            deadline = time.monotonic() + 60
            # the tab's dashboard and the agents it started (telemetry, metrics, ...)
            while not (len(served.tabs()) == 1 and any(
                    b"dsv4tui.agent" in Path(f"/proc/{p}/cmdline").read_bytes()
                    for p in _descendants(served.tabs()[0]) if _alive(p))):
                assert time.monotonic() < deadline, "the tab started no agent"
                with contextlib.suppress(asyncio.TimeoutError):
                    await ws.receive(timeout=0.2)
            procs = _descendants(served.proc.pid)
            served.proc.kill()
            served.proc.wait(10)
            return procs

    procs = asyncio.run(go())
    try:
        assert len(procs) >= 2
        _wait(f"left running after serve was killed: {[p for p in procs if _alive(p)]}",
              lambda: not any(_alive(p) for p in procs), 30)
    finally:  # whatever failed, nothing of this test stays behind
        for pid in procs:
            if _alive(pid):
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)


def test_bind_addresses_and_bad_ports(capsys: pytest.CaptureFixture[str]) -> None:
    assert serve.bind_warning("127.0.0.1") is None and serve.bind_warning("::1") is None
    assert serve.bind_warning("127.0.0.2") is None and serve.bind_warning("localhost") is None
    warning = serve.bind_warning("10.1.2.3")
    assert warning and "reachable from other machines" in warning and "token" in warning
    assert serve.url_host("::1") == "[::1]"
    port = free_port()
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
        s.listen()
        assert main(["serve", "demo", "--port", str(port)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"cannot listen on 127.0.0.1:{port}" in err and len(err.splitlines()) == 1
    assert main(["serve", "demo", "--port", "0"]) == 2
    assert "--port 0" in capsys.readouterr().err


def test_each_tab_runs_this_dsv4tui_with_the_same_options(tmp_path: Path) -> None:
    import argparse

    args = argparse.Namespace(config=str(tmp_path / "my config.toml"), host="ct200",
                              screen="runs", theme="light", no_start=False, accept_new=True)
    cmd = serve.tab_command(args)
    assert cmd.startswith("exec ") and sys.executable in cmd
    assert "'--config'" not in cmd and f"'{tmp_path}/my config.toml'" in cmd
    assert cmd.endswith("serve ct200 --tab --screen runs --theme light --accept-new")
