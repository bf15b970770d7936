"""The dashboard App: one main screen whose bodies switch (:mod:`dsv4tui.tui.screens.main`),
the batched model flush (:mod:`dsv4tui.tui.flush`), one error
dialog for any worker's failure, keys in their order (:mod:`dsv4tui.tui.key_order`), and the
controllers it composes (:mod:`dsv4tui.tui.controllers`: server, sweeps and campaigns, runs
and files, the visit, the fleet), each key a one-line action handing over to the one that owns
it. What an event changes in the model is the core's (``dsv4tui.core.view``); nothing here
times requests (the agent on the host measures)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from textual import events, on
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.signal import Signal
from textual.worker import Worker, WorkerState

from dsv4tui.core.config import Settings
from dsv4tui.core.errors import UserError
from dsv4tui.core.view import model as m
from dsv4tui.core.view import navigation
from dsv4tui.core.view.host_link import HostLink
from dsv4tui.core.view.journal import Effects
from dsv4tui.core.view.navigation import Navigation
from dsv4tui.core.view.notice import Notice
from dsv4tui.core.view.parts import GPU
from dsv4tui.core.view.profiles import model_for
from dsv4tui.tui import keymap, themes
from dsv4tui.tui.clock import CLOCK_S
from dsv4tui.tui.controllers.fleet import FleetMember
from dsv4tui.tui.controllers.runs import RunsControl
from dsv4tui.tui.controllers.server import ServerControl
from dsv4tui.tui.controllers.sweeps import SweepsControl
from dsv4tui.tui.controllers.visit import VisitControl
from dsv4tui.tui.controllers.watch import Watch
from dsv4tui.tui.flush import ModelFlush
from dsv4tui.tui.gc_policy import GcPolicy
from dsv4tui.tui.key_order import KeyOrder
from dsv4tui.tui.screens import dialogs
from dsv4tui.tui.screens.base import TAB_TITLES, Body
from dsv4tui.tui.screens.bench import BenchBody
from dsv4tui.tui.screens.campaign import CampaignBody
from dsv4tui.tui.screens.dashboard import DashboardBody
from dsv4tui.tui.screens.help import HelpScreen
from dsv4tui.tui.screens.kernels import KernelsBody
from dsv4tui.tui.screens.launch import LaunchBody
from dsv4tui.tui.screens.logs import LogsBody
from dsv4tui.tui.screens.main import MainScreen
from dsv4tui.tui.screens.modals import ErrorScreen
from dsv4tui.tui.screens.runs import CompareScreen, RunsBody
from dsv4tui.tui.widgets.gpu_panel import GpuFrame

SCREENS: dict[str, type[Body]] = {"dashboard": DashboardBody, "logs": LogsBody,
                                   "launch": LaunchBody, "bench": BenchBody, "runs": RunsBody,
                                   "kernels": KernelsBody, "campaign": CampaignBody}
EXTRA_TABS = {"6": ("kernels", "Kernels"), "7": ("campaign", "Campaign")}  # after keymap's 1-5


class Dsv4App(App[int]):
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
        self.settings, self.spec = settings or Settings(), spec
        self.model = model = model if model is not None else m.UiModel() if spec is None else (
            model_for(spec.name, spec.config, simulated=spec.simulated))
        self.start_mode = start_mode
        self._requested_theme = theme
        self.clock: Signal[float] = Signal(self, "clock")  # tui/clock.py: what ages, each second
        self.flush = ModelFlush(self, model, self.clock, live=lambda: self.sweeps.watch.live,
                                stopping=lambda: self.visit.stopping)
        self.main: MainScreen | None = None  # the main screen, once the app runs
        self.active_keymap: dict[str, str] = {}  # binding id -> keys, as set_keymap got it
        self.nav = Navigation()  # the user's screen choices: automatic moves yield to them
        self.extra_tabs = dict(EXTRA_TABS)
        self.last_error: str | None = None  # the last error dialog's message (tests)
        self.key_order = KeyOrder(self, lambda: self.active_keymap)  # keys go where focus went
        self.gc_policy = GcPolicy(self)  # full collections between keys (live hosts only)
        self.link = HostLink(spec, model, mark=self.mark, on_frame=self._on_frame,
                             on_back=lambda: self.visit.link_back())
        watch = Watch()  # what the host runs that we watch: the server's and the sweeps'
        self.runs = RunsControl(self, model, self.link, spec, nav=self.nav, store=store)
        self.server = ServerControl(self, model, self.link, spec, settings=self.settings,
                                    config_path=config_path, store=lambda: self.runs.store,
                                    watch=watch, apply=self.apply)
        self.sweeps = SweepsControl(self, model, self.link, spec, settings=self.settings,
                                    server=self.server, runs=self.runs, watch=watch,
                                    apply=self.apply)
        self.fleet = FleetMember(self, model, leave=lambda result: self.visit.back_to(result))
        self.visit = VisitControl(self, model, self.link, settings=self.settings,
                                  autostart=autostart, server=self.server, sweeps=self.sweeps,
                                  runs=self.runs, shared=self.fleet.supervisor)

    def on_mount(self) -> None:
        warning = themes.install(self, self._requested_theme or self.settings.theme)
        if warning:
            self.notify(warning, title="theme", severity="warning", timeout=8, markup=False)
        km, problems = keymap.check_keymap(self.settings.keymap)
        if km:
            self.set_keymap(km)
        for problem in problems:
            self.notify(problem, title="config", severity="warning", timeout=8, markup=False)
        for note in self.notes:
            self.notify(note, timeout=20, markup=False)
        self.set_interval(CLOCK_S, self.mark)  # the clock's second rides on a model frame
        if self.spec is not None:
            self.call_after_refresh(self.gc_policy.start)  # the frame is up: freeze it
            self.visit.arrive()

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key) and not event.is_forwarded:  # typed: in its order
            self.gc_policy.key()
            return await self.key_order.answer(event, super().on_event)
        await super().on_event(event)

    def get_default_screen(self) -> Screen[Any]:
        start = self.start_mode if self.start_mode in SCREENS else "dashboard"
        bodies = [LaunchBody(self.model, self.server) if cls is LaunchBody else cls(self.model)
                  for cls in SCREENS.values()]
        self.main = MainScreen(self.model, bodies, start)
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
        return themes.app_variable_defaults(self)

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        holder: Any = screen.body if isinstance(screen, MainScreen) else screen
        yield from keymap.palette(self, holder, self.active_keymap)

    def key_of(self, binding_id: str) -> str:
        """The key that does ``binding_id`` (after the config's keymap), as shown."""
        return keymap.display_key(self.settings.keymap.get(binding_id,
                                                           keymap.BY_ID[binding_id].key))

    def mark(self, *parts: str) -> None:
        """Parts of the model changed: the screen on top redraws them (tui/flush.py)."""
        self.flush.mark(*parts)

    def apply(self, fx: Effects) -> None:
        """What a core model function did: redraw its parts, do what it asks next."""
        self.mark(*fx.parts)
        self.link.follow_log(fx.follow_log)
        if fx.refresh_status:
            self.server.refresh_later()
        if fx.run_stored:
            self.runs.load_runs()  # the Runs list shows the new run (running) while it runs

    def tell(self, notice: Notice | None) -> None:
        """A notification in the core's words."""
        if notice is not None:
            self.notify(notice.text, title=notice.title, severity=notice.severity,
                        timeout=notice.timeout, markup=False)

    def _on_frame(self, frame: Any) -> None:
        self.post_message(GpuFrame(self.model.conn.host, frame))

    def on_gpu_frame(self, message: GpuFrame) -> None:
        self.mark(GPU)

    @on(Worker.StateChanged)
    def _worker_state(self, event: Worker.StateChanged) -> None:
        if event.state is not WorkerState.ERROR or self.visit.stopping:
            return
        error = event.worker.error
        message = (error.message if isinstance(error, UserError)
                   else f"{type(error).__name__}: {error}")
        self.show_error(dialogs.error_title(event.worker.group, event.worker.name), message,
                        list(getattr(error, "excerpt", None) or []))

    def show_error(self, title: str, message: str, details: list[str] | None = None) -> None:
        self.last_error = message
        self.push_screen(ErrorScreen(title, message, details))

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
        if (body := self.body) is not None and (panel := body.log_panel()) is not None:
            self.call_after_refresh(panel.view.focus)

    def action_focus_gpus(self) -> None:
        self.nav.chose()
        self.show_body("dashboard")
        if isinstance(body := self.body, DashboardBody):
            self.call_after_refresh(body.focus_gpus)

    # -- the keys the controllers answer (core/actions.py names them) ---------------------
    def action_pick_backend(self) -> None: self.server.pick_backend()
    def action_pick_attention(self) -> None: self.server.pick_attention()
    def action_pick_profile(self) -> None: self.server.pick_profile()
    def action_restart(self) -> None: self.server.restart()
    def action_next_move(self) -> None: self.server.next_move()
    def action_sanity(self) -> None: self.server.check_sanity()
    def action_adopt(self) -> None: self.server.adopt()
    def action_sweep(self) -> None: self.sweeps.sweep()
    def action_pick_campaign(self) -> None: self.sweeps.pick_campaign()
    def action_cancel(self) -> None: self.sweeps.cancel()
    def action_compare(self) -> None: self.runs.compare()
    def action_export(self) -> None: self.runs.export()
    def action_reload_runs(self) -> None: self.runs.load_runs()
    def action_save_screen(self) -> None: self.runs.save_screen()
    def action_report_runs(self) -> None: self.runs.report_runs()
    def action_report_compare(self) -> None: self.runs.report_compare()
    def action_fleet(self) -> None: self.fleet.back()
    def action_quit_app(self) -> None: self.visit.quit()

    def on_kernels_body_reload(self, message: KernelsBody.Reload) -> None:
        self.runs.load_captures(message.screen)

    def on_kernels_body_run_requested(self, message: KernelsBody.RunRequested) -> None:
        self.runs.take_capture(int(message.steps), int(message.concurrency))

    async def on_unmount(self) -> None:
        self.gc_policy.stop()
        await self.visit.leave()
