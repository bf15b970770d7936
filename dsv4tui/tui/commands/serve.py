"""``dsv4tui serve (HOST | demo) [--port P] [--bind ADDR]``: the dashboard in a browser.

textual-serve runs one dashboard process per browser tab (exactly the terminal app, on
Textual's web driver) and streams it over a websocket. It has no authentication of its own,
so :class:`TokenServer` (a subclass of its ``Server``) lets nobody in without a secret:

- a random token, printed once as part of the URL (``http://127.0.0.1:PORT/?token=...``);
- the page (``/``) answers only with ``?token=`` (or the cookie it set), else 403;
- the page sets an HttpOnly, SameSite=Strict cookie holding the token, and the websocket
  (``/ws``) answers only with that cookie (or ``?token=``) and from the page's own origin,
  else 403 before the upgrade; downloads (``/download/...``) need it too; only textual-serve's
  own static files (its JS, CSS, fonts) are open;
- it binds 127.0.0.1 unless ``--bind`` says otherwise; another address is served with the
  same token and a warning (the expected remote use is an SSH port-forward, README).

Closing a tab ends that tab's dashboard process (textual-serve asks it to quit; in
``--tab`` mode the process exits as soon as the app has); stopping ``serve`` (Ctrl-C)
ends every tab's, and ``serve demo`` stops the simulated server a tab started. A ``serve``
killed outright (SIGKILL) cannot: each tab watches its parent and ends when it is gone, and
its agents with it (a simulated server a tab started is left running then: ``server stop demo``).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import hashlib
import hmac
import ipaddress
import logging
import os
import secrets
import shlex
import signal
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

from dsv4tui.core.entry import load_settings, run_async
from dsv4tui.core.errors import EXIT_CONFIG, EXIT_INTERRUPTED, UserError
from dsv4tui.tui.commands.dashboard import add_app_args

DEFAULT_PORT = 8765
LOOPBACK = "127.0.0.1"
TAB_STOP_S = 10.0  # how long a tab's dashboard gets to end after serve stops
TAB_ORPHAN_GRACE_S = 5.0  # ... and to quit by itself once serve is gone (it was killed)
SERVE_PID_ENV = "DSV4TUI_SERVE_PID"  # the serve process a tab belongs to
# the page: textual-serve's own, with a <title> and its font from its static files (its
# template loads one from fonts.googleapis.com, which an air-gapped GPU box cannot reach)
PAGE_DIR = Path(__file__).resolve().parent / "serve_page"
INSTALL_HINT = "dsv4tui serve needs textual-serve: pip install textual-serve"

FORBIDDEN = ("403: this dsv4tui dashboard needs its token: open the URL `dsv4tui serve` "
             "printed (http://HOST:PORT/?token=...)\n")


def register(sub: Any) -> None:
    p = sub.add_parser("serve")
    p.add_argument("host", metavar="HOST", help="a host as for connect, or demo")
    p.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help=f"TCP port (default {DEFAULT_PORT})")
    p.add_argument("--bind", default=LOOPBACK, metavar="ADDR",
                   help="address to listen on (default 127.0.0.1: reach it through an SSH "
                   "port-forward; another address is served with the token and a warning)")
    p.add_argument("--accept-new", action="store_true",
                   help="trust an unknown host key on first use (a changed key is still refused)")
    p.add_argument("--no-start", action="store_true",
                   help="demo: do not start the simulated server (r starts it)")
    add_app_args(p)
    p.add_argument("--tab", action="store_true", help=argparse.SUPPRESS)  # one tab's app
    p.set_defaults(func=run)


# --- addresses ------------------------------------------------------------------------------

def is_loopback(addr: str) -> bool:
    """True when every address ``addr`` names is a loopback one (127.0.0.0/8, ::1)."""
    try:
        return ipaddress.ip_address(addr.strip("[]")).is_loopback
    except ValueError:
        pass
    try:
        infos = socket.getaddrinfo(addr, None)
    except OSError:
        return False
    return bool(infos) and all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos)


def bind_warning(addr: str) -> str | None:
    """The warning for listening on ``addr`` (None for loopback)."""
    if is_loopback(addr):
        return None
    return (f"warning: serving on {addr}, reachable from other machines; anyone who has the "
            "URL (its token) gets this dashboard and control of its host's server; prefer "
            "the default 127.0.0.1 and an SSH port-forward (README: dsv4tui serve)")


def url_host(addr: str) -> str:
    """The host part of the printed URL for a listening address."""
    if addr in ("0.0.0.0", "::", ""):
        return socket.gethostname()
    return f"[{addr}]" if ":" in addr and not addr.startswith("[") else addr


def check_port(addr: str, port: int) -> None:
    """A one-line error now, rather than textual-serve's traceback later, when the address
    cannot be listened on."""
    if not 0 < port < 65536:
        raise UserError(f"serve: --port {port}: give 1-65535", EXIT_CONFIG)
    try:
        infos = socket.getaddrinfo(addr.strip("[]"), port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise UserError(f"serve: --bind {addr}: {exc.strerror or exc}", EXIT_CONFIG) from None
    family, kind, proto, _, sockaddr = infos[0]
    with socket.socket(family, kind, proto) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(sockaddr)
        except OSError as exc:
            raise UserError(f"serve: cannot listen on {addr}:{port}: {exc.strerror or exc}"
                            " (another --port?)", EXIT_CONFIG) from None


# --- the server -----------------------------------------------------------------------------

def _textual_serve() -> Any:
    try:
        from textual_serve import server as ts
    except ImportError:
        raise UserError(INSTALL_HINT, EXIT_CONFIG) from None
    return ts


def make_server(command: str, *, token: str, bind: str = LOOPBACK, port: int = DEFAULT_PORT,
                title: str = "dsv4tui", banner: list[str] | None = None) -> Any:
    """A textual-serve ``Server`` for ``command`` that needs ``token`` (see the module doc)."""
    ts = _textual_serve()
    from aiohttp import web

    class TokenServer(ts.Server):  # type: ignore[misc, name-defined]
        """textual-serve's Server, every request but its static files behind the token."""

        def __init__(self) -> None:
            super().__init__(command, host=bind, port=port, title=title,
                             public_url=f"http://{url_host(bind)}:{port}",
                             templates_path=PAGE_DIR)
            self.token = token
            self.cookie = "dsv4tui-" + hashlib.sha256(token.encode()).hexdigest()[:12]
            self.banner = banner or []
            self.tabs: set[asyncio.Task[Any]] = set()

        def token_ok(self, given: str | None) -> bool:
            return bool(given) and hmac.compare_digest(str(given).encode(),
                                                       self.token.encode())

        def initialize_logging(self) -> None:
            super().initialize_logging()
            # the access log would print the token (in each page URL) again and again
            logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
            logging.getLogger("textual-serve").setLevel(logging.WARNING)

        @web.middleware
        async def guard(self, request: web.Request, handler: Any) -> web.StreamResponse:
            path = request.path
            if path.startswith("/static/"):
                return await handler(request)
            given = request.query.get("token") or request.cookies.get(self.cookie)
            allowed = self.token_ok(given)
            if path == "/ws" and allowed:
                origin = request.headers.get("Origin")
                allowed = origin is None or origin in (f"http://{request.host}",
                                                       f"https://{request.host}")
            if not allowed:
                raise web.HTTPForbidden(text=FORBIDDEN, headers={"Cache-Control": "no-store"})
            response = await handler(request)
            if path == "/":
                response.headers["Cache-Control"] = "no-store"
                response.headers["Referrer-Policy"] = "no-referrer"
                response.headers["X-Frame-Options"] = "DENY"
                response.headers["Content-Security-Policy"] = "frame-ancestors 'none'"
                if request.query.get("token"):
                    response.set_cookie(self.cookie, self.token, httponly=True,
                                        samesite="Strict", path="/")
            return response

        async def _make_app(self) -> web.Application:
            app = await super()._make_app()
            app.middlewares.append(self.guard)
            return app

        async def handle_index(self, request: web.Request) -> Any:
            # the page's own URLs (static files, the websocket) on the host and port the
            # browser used: through an SSH port-forward those are not ours
            self.public_url = f"{request.scheme}://{request.host}"
            return await super().handle_index(request)

        async def handle_websocket(self, request: web.Request) -> web.WebSocketResponse:
            task = asyncio.current_task()
            if task is not None:
                self.tabs.add(task)
            try:
                return await super().handle_websocket(request)  # type: ignore[no-any-return]
            finally:
                if task is not None:
                    self.tabs.discard(task)

        async def on_startup(self, app: web.Application) -> None:
            # aiohttp listens only after its startup hooks: say the URL once it answers
            self.announcing = asyncio.create_task(self.announce())

        async def announce(self) -> None:
            probe = {"0.0.0.0": LOOPBACK, "::": "::1", "": LOOPBACK}.get(bind, bind.strip("[]"))
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                try:
                    _, writer = await asyncio.open_connection(probe, port)
                except OSError:
                    await asyncio.sleep(0.02)
                    continue
                writer.close()
                break
            for line in self.banner:
                print(line, flush=True)

        async def on_shutdown(self, app: web.Application) -> None:
            # each tab's handler asks its dashboard to quit and waits for it; what is still
            # there after TAB_STOP_S is terminated
            tabs = list(self.tabs)
            for task in tabs:
                task.cancel()
            if tabs:
                await asyncio.wait(tabs, timeout=TAB_STOP_S)
            await asyncio.to_thread(end_children, 3.0)

    return TokenServer()


def children(pid: int | None = None) -> list[int]:
    """The live child processes of ``pid`` (default: this one), from /proc."""
    pid = os.getpid() if pid is None else pid
    found = []
    for entry in Path("/proc").iterdir() if Path("/proc").is_dir() else []:
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[-1].split()
        if len(fields) > 2 and fields[0] != "Z" and int(fields[1]) == pid:
            found.append(int(entry.name))
    return found


def end_children(grace: float) -> None:
    """SIGTERM this process's children (tabs' dashboards that did not quit), SIGKILL what
    is left after ``grace`` seconds."""
    pids = children()
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while pids and time.monotonic() < deadline:
        time.sleep(0.1)
        pids = [p for p in pids if p in children()]
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def tab_command(args: argparse.Namespace) -> str:
    """The shell command textual-serve runs for each tab: this dsv4tui, ``serve HOST --tab``
    with the same options (``exec``: the shell is replaced, one process per tab)."""
    argv = [sys.executable, "-m", "dsv4tui"]
    if getattr(args, "config", None):
        argv += ["--config", str(Path(args.config).expanduser().resolve())]
    argv += ["serve", args.host, "--tab", "--screen", args.screen]
    if args.theme:
        argv += ["--theme", args.theme]
    if args.no_start:
        argv.append("--no-start")
    if args.accept_new:
        argv.append("--accept-new")
    return "exec " + shlex.join(argv)


# --- the demo's simulated server ------------------------------------------------------------

def _demo_state(settings: Any, stop: bool = False) -> str | None:
    from dsv4tui.core.hosts.visit import demo_server_state

    try:
        return run_async(demo_server_state(settings, stop=stop))
    except UserError as exc:
        print(f"dsv4tui serve: note: the demo's simulated server: {exc.message}",
              file=sys.stderr)
        return None


# --- the command ----------------------------------------------------------------------------

def watch_parent(grace: float = TAB_ORPHAN_GRACE_S, every: float = 0.25) -> threading.Thread:
    """End this tab's dashboard when ``serve`` (our parent: textual-serve ``exec``s us) is
    gone, however it ended (SIGKILL too): SIGTERM ourselves (Textual's web driver quits the
    app, which ends its agents), then, ``grace`` seconds later, exit whatever is still
    running. The agents it started (``--cancel-on-eof``) end when our pipes to them close."""
    parent = int(os.environ.get(SERVE_PID_ENV) or os.getppid())  # gone before we looked, too

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every)
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(grace)
        os._exit(EXIT_INTERRUPTED)

    thread = threading.Thread(target=watch, name="serve-watch", daemon=True)
    thread.start()
    return thread


def run_tab(args: argparse.Namespace) -> int:
    """One tab's dashboard (textual-serve started us with Textual's web driver)."""
    from dsv4tui.core.config import DEMO
    from dsv4tui.tui.commands.dashboard import app_for

    watch_parent()
    code = app_for(args, demo=args.host == DEMO).run() or 0
    # the tab is closed: end now, whatever threads a worker left behind
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(int(code))


def run(args: argparse.Namespace) -> int:
    if args.tab:
        return run_tab(args)
    from dsv4tui.core.config import DEMO
    from dsv4tui.core.hosts.resolve import host_spec

    settings, _ = load_settings(args)
    host_spec(args.host, settings, accept_new=args.accept_new)  # a bad name fails here
    _textual_serve()
    check_port(args.bind, args.port)
    warning = bind_warning(args.bind)
    token = secrets.token_urlsafe(24)
    url = f"http://{url_host(args.bind)}:{args.port}/?token={token}"
    banner = [f"dsv4tui serve: the dashboard for {args.host} at", f"  {url}",
              "each browser tab gets its own dashboard; Ctrl-C stops them all"]
    if warning:
        print(warning, file=sys.stderr, flush=True)
    demo_before = _demo_state(settings) if args.host == DEMO else None
    os.environ[SERVE_PID_ENV] = str(os.getpid())  # each tab ends when this process is gone
    server = make_server(tab_command(args), token=token, bind=args.bind, port=args.port,
                         title=f"dsv4tui {args.host}", banner=banner)
    try:
        server.serve()
    except OSError as exc:
        raise UserError(f"serve: {exc.strerror or exc}", EXIT_CONFIG) from None
    finally:
        end_children(3.0)
        if args.host == DEMO and demo_before in ("stopped", "crashed", "unknown"):
            _demo_state(settings, stop=True)  # a tab started it: it goes with serve
    print("dsv4tui serve: stopped", file=sys.stderr)
    return 0
