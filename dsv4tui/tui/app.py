"""The dashboard App: one main screen whose bodies switch (:mod:`dsv4tui.tui.screens.main`), bindings, the connection's workers, and the
batched model flush. Its keys and workers by feature are mixed in: the server's
(:mod:`dsv4tui.tui.app_server`), the run store's and the kernel captures'
(:mod:`dsv4tui.tui.app_runs`), sweeps and campaigns (:mod:`dsv4tui.tui.app_campaign`), the
Fleet's (:mod:`dsv4tui.tui.app_fleet`).

The App owns what lives longer than a screen: the :class:`HostSupervisor` of the one host
(connection state, reconnects, the long-lived ``telemetry``, ``metrics`` and ``logs --follow``
streams), the :class:`UiModel` the screens draw, the run store, and every worker (restart,
sanity, sweep, store queries). What an event changes in the model, which backend fits which
checkpoint, where a file goes: the core (``dsv4tui.core.view`` and the modules it names).
Screens only read the model and get :class:`ModelUpdated` messages, batched here to at most
~10 per second. Any worker failure becomes one error dialog (:meth:`Dsv4App._worker_state`).

Nothing here times requests: the agent on the host measures; the App displays its events.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterable, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import Any

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.worker import Worker, WorkerState

from dsv4tui.core import signals
from dsv4tui.core.config import ServerProfile, Settings
from dsv4tui.core.errors import ConnectError, UserError
from dsv4tui.core.hosts import visit
from dsv4tui.core.server.host_facts import HostFacts
from dsv4tui.core.view import model as m
from dsv4tui.core.view import navigation
from dsv4tui.core.view.host_link import HostLink
from dsv4tui.core.view.journal import Effects
from dsv4tui.core.view.navigation import Navigation
from dsv4tui.core.view.next_launch import NextLaunch
from dsv4tui.core.view.notice import Notice
from dsv4tui.core.view.parts import ALL, GPU, LOGS, SWEEP
from dsv4tui.core.view.profiles import model_for
from dsv4tui.core.view.runs import Newest, StoreChanges
from dsv4tui.tui import keymap, themes
from dsv4tui.tui.app_campaign import CampaignWatcher
from dsv4tui.tui.app_fleet import FleetMember
from dsv4tui.tui.app_runs import RunsKeys
from dsv4tui.tui.app_server import ServerKeys
from dsv4tui.tui.screens import dialogs
from dsv4tui.tui.screens.base import TAB_TITLES, Body, FramedScreen
from dsv4tui.tui.screens.bench import BenchBody
from dsv4tui.tui.screens.campaign import CampaignBody
from dsv4tui.tui.screens.dashboard import DashboardBody
from dsv4tui.tui.screens.help import HelpScreen
from dsv4tui.tui.screens.kernels import KernelsBody
from dsv4tui.tui.screens.launch import LaunchBody
from dsv4tui.tui.screens.logs import LogsBody
from dsv4tui.tui.screens.main import MainScreen
from dsv4tui.tui.screens.messages import ModelUpdated
from dsv4tui.tui.screens.modals import ErrorScreen
from dsv4tui.tui.screens.runs import CompareScreen, RunsBody
from dsv4tui.tui.widgets.gpu_panel import GpuFrame

FLUSH_S = 0.1  # model changes reach the screen at most this often
LIVE_LEVEL_S = 0.5  # the running level's live TTFT/TPOT/tok/s are recomputed this often
STATUS_POLL_S = 15.0
SCREENS: dict[str, type[Body]] = {
    "dashboard": DashboardBody, "logs": LogsBody, "launch": LaunchBody,
    "bench": BenchBody, "runs": RunsBody, "kernels": KernelsBody,
    "campaign": CampaignBody}
EXTRA_TABS = {"6": ("kernels", "Kernels"), "7": ("campaign", "Campaign")}  # after keymap's 1-5
PALETTE_SCOPES = {"logs", "runs", "compare"}  # the screens' key scopes the palette lists too
WORKERS_TO_END = ("sweep", "sanity", "server", "status", "connect")  # cancelled by a quit


class Dsv4App(ServerKeys, RunsKeys, FleetMember, CampaignWatcher, App[int]):
    """``Dsv4App(spec=host_spec(...), settings=...)`` runs live; ``Dsv4App(model=frozen)``
    shows a frozen model (snapshot tests) without any host."""

    TITLE = "dsv4tui"
    CSS_PATH = [str(Path(__file__).with_name("app.tcss")), str(themes.TCSS)]
    BINDINGS = [*keymap.bindings("app"),
                Binding("ctrl+c", "quit_app", "Quit", show=False, priority=True, system=True)]
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (30, "-tall")]

    def __init__(self, spec: Any = None, *, settings: Settings | None = None,
                 theme: str | None = None, model: m.UiModel | None = None,
                 autostart: bool = False, start_mode: str = "dashboard",
                 store: Any = None, config_path: Path | None = None,
                 notes: Sequence[str] = ()) -> None:
        super().__init__()
        self.notes = list(notes)  # said once the dashboard is up (the demo's port)
        self.settings = settings or Settings()
        self.config_path = config_path  # where adopt writes (None: the default config file)
        self.spec = spec
        self.live = spec is not None
        if model is None:
            model = m.UiModel() if spec is None else model_for(spec.name, spec.config,
                                                               simulated=spec.simulated)
        self.model = model
        self.autostart = autostart
        self.start_mode = start_mode
        self._requested_theme = theme
        self._dirty: set[str] = set()
        self._flush_pending = False
        self._live_at = 0.0
        self.main: MainScreen | None = None  # the main screen, once the app runs
        self.active_keymap: dict[str, str] = {}  # binding id -> keys, as set_keymap got it
        self.nav = Navigation()  # the user's screen choices: automatic moves yield to them
        self.next_launch = NextLaunch()  # the backend and attention flags picked per profile
        self.host_facts = HostFacts()  # the GPUs' compute capability, the SGLang versions
        self._adopt_offered: set[Any] = set()  # foreign pids the adopt step was offered for
        self.link = HostLink(spec, self.model, mark=self.mark, on_frame=self._on_frame,
                             on_back=self._link_back)
        self._store: Any = store
        self._own_cid: str | None = None  # the sweep or campaign this console started
        self._runs_reads = Newest()  # run-list reads: a slow older read never wins
        self._store_changes = StoreChanges()  # commits by other processes since the last look
        self._live_levels: dict[int, m.LiveLevel] = {}
        self._stopping = False
        self._hangup = False  # the terminal closed (SIGHUP): end the process once clean
        self._started_server = False  # this session started the server (the demo stops it)
        self.extra_tabs = dict(EXTRA_TABS)
        self.last_error: str | None = None  # the last error dialog's message (tests)

    # -- setup ------------------------------------------------------------------------------
    def on_mount(self) -> None:
        for theme in themes.THEMES.values():
            self.register_theme(theme)
        name, warning = themes.resolve(self._requested_theme or self.settings.theme)
        self.theme = name
        self._theme_class(name)
        self.theme_changed_signal.subscribe(self, lambda t: self._theme_class(t.name))
        if warning:
            self.notify(warning, title="theme", severity="warning", timeout=8, markup=False)
        km, problems = keymap.check_keymap(self.settings.keymap)
        if km:
            self.set_keymap(km)
        for problem in problems:
            self.notify(problem, title="config", severity="warning", timeout=8, markup=False)
        for note in self.notes:
            self.notify(note, timeout=20, markup=False)
        if self.live:
            self.open_store()
            self.connect_host()
            signals.on_quit_signals(self._on_signal)

    def get_default_screen(self) -> Screen[Any]:
        start = self.start_mode if self.start_mode in SCREENS else "dashboard"
        self.main = MainScreen(self.model, [cls(self.model) for cls in SCREENS.values()], start)
        return self.main

    @property
    def view(self) -> str:
        """The body in view on the main screen (``"dashboard"`` ... ``"campaign"``)."""
        return self.main.MODE if self.main is not None else self.start_mode

    @property
    def body(self) -> Body | None:
        return self.main.body if self.main is not None else None

    def show_body(self, mode: str) -> None:
        """The main screen shows ``mode``'s body (what is pushed over it stays)."""
        if self.main is not None:
            self.main.show(mode)

    def set_keymap(self, keymap: Mapping[str, str]) -> None:
        self.active_keymap = dict(keymap)
        super().set_keymap(keymap)

    def update_keymap(self, keymap: Mapping[str, str]) -> None:
        self.active_keymap = {**self.active_keymap, **keymap}
        super().update_keymap(keymap)

    def get_theme_variable_defaults(self) -> dict[str, str]:
        theme = self.current_theme if self.is_running else None
        return themes.variable_defaults(theme.dark if theme is not None else True)

    def _theme_class(self, name: str) -> None:
        for t in themes.THEMES:
            self.set_class(t == name, f"-theme-{t}")

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        holder: Any = screen.body if isinstance(screen, MainScreen) else screen
        scopes = {"app", *PALETTE_SCOPES.intersection(getattr(holder, "SCOPES", ()))}
        for action, keys in keymap.effective(self.active_keymap):
            if action.palette and action.scope in scopes:
                target = self if action.scope == "app" else holder
                yield SystemCommand(f"{action.description} ({keys})", action.help,
                                    partial(self.call_later, self.run_action, action.action,
                                            target))
        for name in themes.THEMES:
            yield SystemCommand(f"Theme: {name}", f"Switch to the {name} theme",
                                partial(setattr, self, "theme", name))

    def key_of(self, binding_id: str) -> str:
        """The key that does ``binding_id`` (after the config's keymap), as shown."""
        return keymap.display_key(self.settings.keymap.get(binding_id,
                                                           keymap.BY_ID[binding_id].key))

    # -- batched model updates -------------------------------------------------------------
    def mark(self, *parts: str) -> None:
        """Parts of the model changed: the screen on top redraws them within FLUSH_S."""
        self._dirty.update(parts)
        if not self._flush_pending:
            self._flush_pending = True
            self.set_timer(FLUSH_S, self._flush_model)

    def _flush_model(self) -> None:
        self._flush_pending = False
        now = time.monotonic()
        if self._live_levels and now - self._live_at >= LIVE_LEVEL_S:
            self._live_at = now  # level_metrics over a level's requests: at most 2 per second
            if m.refresh_live_levels(self.model.sweep, self._live_levels):
                self._dirty.add(SWEEP)
        parts, self._dirty = frozenset(self._dirty), set()
        if not parts or self._stopping or not self.is_running:
            return
        try:
            screen = self.screen
        except Exception:  # no screen yet / any more (start-up, shutdown)
            return
        if isinstance(screen, FramedScreen):
            screen.post_message(ModelUpdated(parts))

    def apply(self, fx: Effects) -> None:
        """What a core model function did: redraw its parts, do what it asks next."""
        self.mark(*fx.parts)
        self.link.follow_log(fx.follow_log)
        if fx.refresh_status:
            self._refresh_later()
        if fx.run_stored:
            self.load_runs()  # the Runs list shows the new run (running) while it runs

    def tell(self, notice: Notice | None) -> None:
        """A notification in the core's words."""
        if notice is not None:
            self.notify(notice.text, title=notice.title, severity=notice.severity,
                        timeout=notice.timeout, markup=False)

    def _on_frame(self, frame: Any) -> None:
        self.post_message(GpuFrame(self.model.conn.host, frame))

    def on_gpu_frame(self, message: GpuFrame) -> None:
        self.mark(GPU)

    # -- workers' failures: one dialog ------------------------------------------------------
    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        if event.state is not WorkerState.ERROR or self._stopping:
            return
        error = event.worker.error
        message = (error.message if isinstance(error, UserError)
                   else f"{type(error).__name__}: {error}")
        self.show_error(dialogs.error_title(event.worker.group, event.worker.name), message,
                        list(getattr(error, "excerpt", None) or []))

    def show_error(self, title: str, message: str, details: list[str] | None = None) -> None:
        self.last_error = message
        self.push_screen(ErrorScreen(title, message, details))

    # -- the connection and the server's status ---------------------------------------------
    @work(group="connect", exclusive=True, exit_on_error=False)
    async def connect_host(self) -> None:
        self.link.start(self.settings.telemetry.interval_s, self.shared_supervisor())
        self._follow_metrics()
        host = await self.link.wait_connected()
        self.load_host_facts()
        self.set_timer(STATUS_POLL_S, self._poll_status)
        try:
            await self._look_around(host)
        except ConnectError as exc:
            # the link dropped while we looked around: the banner says so, and the reconnect
            # refreshes the status and attaches to whatever runs; no dialog over the banner
            self.model.logs.append(f"[dsv4tui] {exc.message}")
            self.mark(LOGS)

    async def _look_around(self, host: Any) -> None:
        """Right after connecting: what the core's ``visit.arrival`` says to do."""
        from dsv4tui.core.campaign import session

        status = await self._refresh_status()
        step = visit.arrival(status, await session.listing(host), autostart=self.autostart,
                             ours=bool(self.model.server.profile))
        if step.show_last is not None:
            self.show_last_campaign(step.show_last)  # the Campaign screen shows the last one
        if step.attach is not None:
            self.attach_running(step.attach)  # someone's sweep or campaign runs: watch it
        elif step.restart:
            if self.view == "dashboard":  # a first look: the startup phases, then sanity
                self.auto_show("launch", 0, "the server is starting")
            self.restart_server(self.model.active_profile, None)
        elif step.sanity:
            self.run_sanity()  # attached to a running server we started: is it still sane?

    def _link_back(self) -> None:
        self._refresh_later()
        if self._sweep_cid is None and not self._stopping:
            self.attach_running()  # started while we were away (another console)

    def _follow_metrics(self) -> None:
        """The server's /metrics: ours wherever it runs, else the active profile's port."""
        try:
            prof: ServerProfile | None = self._profile()[1]
        except UserError:
            prof = None
        self.link.follow_metrics(prof)

    def host(self) -> Any:
        return self.link.host()

    async def _refresh_status(self) -> dict[str, Any]:
        from dsv4tui.core.server import adopt

        status = await self.link.refresh_status()
        offer = adopt.offer(status, self._adopt_offered, simulated=self.model.simulated,
                            key=self.key_of("adopt")) if status else None
        if offer:
            self.notify(offer, title="a server we did not start", timeout=15, markup=False)
        return status

    def _refresh_later(self) -> None:
        self.run_worker(self._refresh_status(), group="status", exclusive=True,
                        exit_on_error=False)

    def _poll_status(self) -> None:
        """Timer-chained: the next poll is armed only after this one finished."""
        async def poll() -> None:
            try:
                if not self.model.startup.active and self.model.conn.connected:
                    with contextlib.suppress(UserError):
                        await self._refresh_status()
            finally:
                if not self._stopping:
                    self.set_timer(STATUS_POLL_S, self._poll_status)
        self.run_worker(poll(), group="status", exclusive=True, exit_on_error=False)

    def refresh_all(self) -> None:  # tests and benchmarks
        self.mark(*ALL)

    # -- actions (keys and the command palette) ---------------------------------------------
    def auto_show(self, mode: str, since: int, what: str) -> bool:
        """A move the dashboard makes on its own: only if the user has chosen no screen since
        ``since`` (a ``nav.token()``; 0: the app's start), else it says what it would show."""
        if self.view == mode:
            return True
        if not self.nav.may_move(since):
            self.tell(navigation.stayed(what, TAB_TITLES[mode], self.key_of(f"screen.{mode}")))
            return False
        self.show_body(mode)
        return True

    def action_show(self, mode: str) -> None:
        if mode not in SCREENS:
            return
        self.nav.chose()
        if self.view == mode and isinstance(self.screen, CompareScreen):
            self.pop_screen()
            return
        while isinstance(self.screen, (HelpScreen, ErrorScreen, CompareScreen)):
            self.pop_screen()
        self.show_body(mode)

    def action_help(self) -> None:
        if isinstance(self.screen, HelpScreen):
            self.pop_screen()
        else:
            self.push_screen(HelpScreen())

    def action_focus_logs(self) -> None:
        self.nav.chose()
        body = self.body
        if body is None or body.log_panel() is None or self.screen is not self.main:
            self.show_body("dashboard")
        self.call_after_refresh(self._focus_log)

    def _focus_log(self) -> None:
        if (body := self.body) is not None and (panel := body.log_panel()) is not None:
            panel.view.focus()

    def action_focus_gpus(self) -> None:
        self.nav.chose()
        self.show_body("dashboard")
        self.call_after_refresh(self._focus_gpus)

    def _focus_gpus(self) -> None:
        if isinstance(body := self.body, DashboardBody):
            body.focus_gpus()

    def action_quit_app(self) -> None:
        busy = self.model.busy
        if busy is None:
            self.quit_cleanly()
            return
        what = visit.quit_warning(busy, simulated=self.model.simulated, watched=self._sweep_cid,
                                  own=self._own_cid)

        def answer(yes: bool | None) -> None:
            if yes:
                self.quit_cleanly()
        self.push_screen(dialogs.quit_confirm(what), answer)

    # -- quitting ---------------------------------------------------------------------------
    def _on_signal(self, sig: int) -> None:
        if sig == signals.HANGUP:  # also when a quit is already under way: it must not wait
            self._hangup = True    # on the terminal that is gone
        if not self._stopping:
            self.quit_cleanly()

    def quit_cleanly(self) -> None:
        self.run_worker(self._quit_cleanly(), group="quit", exit_on_error=False)

    async def _quit_cleanly(self) -> None:
        """What quitting leaves on the host is ``visit.leave``'s; then the agent streams
        close and the App exits (after a hangup: the process ends once clean)."""
        self._stopping = True
        await visit.leave(self.host, self.model, watched=self._sweep_cid, own=self._own_cid,
                          started_server=self._started_server, end_workers=self._end_workers,
                          say=self.tell)
        await self.link.release(10)
        if self._hangup:
            self._close_store()
            signals.end_after_hangup()
        self.exit(0)

    async def _end_workers(self) -> None:
        ending = [worker for worker in list(self.workers) if worker.group in WORKERS_TO_END]
        for worker in ending:
            worker.cancel()
        for worker in ending:  # they store what finished as they unwind
            with contextlib.suppress(Exception):
                await asyncio.wait_for(worker.wait(), 5)

    def _close_store(self) -> None:
        if self._store is not None:
            with contextlib.suppress(Exception):
                self._store.close()

    async def on_unmount(self) -> None:
        self._stopping = True
        await self.link.close(5)
        self._close_store()
