"""Several hosts at once: the Fleet App, and a host's dashboard opened from it.

The connections belong to the :class:`dsv4tui.core.fleet.model.Fleet` (one HostSupervisor per host),
which lives on the event loop longer than any App: :func:`browse` shows the
:class:`FleetApp`; ``enter`` ends it with the host's name and opens that host's
:class:`~dsv4tui.tui.app.Dsv4App` on the *same* supervisor (no reconnect, nothing uploaded
again); ``0`` there ends the dashboard with :data:`BACK` and the Fleet shows again, every other
host still connected and followed all along. ``q`` in either quits.

:class:`FleetMember` is the dashboard's half (a mixin of Dsv4App, as app_campaign's
CampaignWatcher is): a shared supervisor is watched rather than owned, and given back with
its own streams removed instead of being stopped.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding

from dsv4tui.core.config import Settings
from dsv4tui.tui import themes
from dsv4tui.tui.screens.fleet import FleetScreen

BACK = "fleet"  # what a dashboard opened from the fleet exits with to go back to it
DASHBOARD_STREAMS = ("telemetry", "metrics", "logs")  # the streams Dsv4App adds
REDRAW_S = 0.5


class FleetMember:
    """Dsv4App's side of the fleet. ``supervisor``: the fleet's live connection to share."""

    _shared_supervisor: Any = None
    _unwatch: Callable[[], None] | None = None

    def join_fleet(self, supervisor: Any) -> None:
        self._shared_supervisor = supervisor

    def new_supervisor(self, spec: Any) -> Any:
        """The host's supervisor: the fleet's (watched), else a new one (owned)."""
        app: Any = self
        sup = self._shared_supervisor
        if sup is None:
            from dsv4tui.core.hosts.supervisor import HostSupervisor

            return HostSupervisor(spec, on_state=app._on_supervisor_state,
                                  on_stream_error=app._on_stream_error)
        self._unwatch = sup.watch(app._on_supervisor_state, app._on_stream_error)
        app._on_supervisor_state(sup)  # where it stands now (connected, most likely)
        from dsv4tui.tui import keymap

        key = keymap.display_key(app.settings.keymap.get("screen.fleet",
                                                         keymap.BY_ID["screen.fleet"].key))
        app.notify(f"{key}: back to the fleet (every host stays connected)", timeout=6,
                   markup=False)
        return sup

    async def release_supervisor(self, timeout: float) -> None:
        """Stop the supervisor we own; give a shared one back, still connected."""
        app: Any = self
        sup = app._supervisor
        if sup is None:
            return
        if sup is self._shared_supervisor:
            for name in DASHBOARD_STREAMS:
                sup.remove_stream(name)
            if self._unwatch is not None:
                self._unwatch()
                self._unwatch = None
            app._supervisor = None
            return
        with contextlib.suppress(Exception):
            await asyncio.wait_for(sup.stop(), timeout)

    def action_fleet(self) -> None:
        app: Any = self
        if self._shared_supervisor is None:
            app.notify("this dashboard was not opened from a fleet (dsv4tui connect HOST HOST "
                       "... opens one)", timeout=4)
            return
        busy = app.model.busy
        if busy is None:
            app.run_worker(self._back(), group="quit", exit_on_error=False)
            return
        from dsv4tui.tui.screens.modals import ConfirmScreen

        def answer(yes: bool | None) -> None:
            if yes:
                app.run_worker(self._back(), group="quit", exit_on_error=False)
        app.push_screen(ConfirmScreen(
            "back to the fleet?", f"a {busy} is running on the host: it goes on there; this "
            "host's dashboard picks it up again when you open it", yes="Back"), answer)

    async def _back(self) -> None:
        app: Any = self
        app._stopping = True  # no more background screens are mounted (_warm_modes)
        await self.release_supervisor(5)
        await app.settle_screens()
        app.exit(BACK)


class FleetApp(App[str | None]):
    """The Fleet screen over ``fleet`` (anything with ``summaries()``): redrawn every
    REDRAW_S; ``enter`` exits with the host's name (``browse`` opens its dashboard)."""

    TITLE = "dsv4tui fleet"
    CSS_PATH = [str(Path(__file__).with_name("app.tcss")), str(themes.TCSS)]
    BINDINGS = [Binding("ctrl+c", "quit", "Quit", show=False, priority=True, system=True)]

    def __init__(self, fleet: Any, *, settings: Settings | None = None,
                 theme: str | None = None, selected: str | None = None,
                 title: str = "fleet", live: bool = True) -> None:
        super().__init__()
        self.fleet = fleet
        self.settings = settings or Settings()
        self._requested_theme = theme
        self._selected = selected
        self._title = title
        self._live = live

    def get_theme_variable_defaults(self) -> dict[str, str]:
        theme = self.current_theme if self.is_running else None
        return themes.variable_defaults(theme.dark if theme is not None else True)

    def on_mount(self) -> None:
        for theme in themes.THEMES.values():
            self.register_theme(theme)
        name, warning = themes.resolve(self._requested_theme or self.settings.theme)
        self.theme = name
        for t in themes.THEMES:
            self.set_class(t == name, f"-theme-{t}")
        if warning:
            self.notify(warning, title="theme", severity="warning", timeout=8, markup=False)
        self.push_screen(FleetScreen(title=self._title, selected=self._selected))
        self.call_after_refresh(self.redraw)
        if self._live:
            self.set_interval(REDRAW_S, self.redraw)
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGHUP, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                    loop.add_signal_handler(sig, self.exit)

    def redraw(self) -> None:
        screen = self.screen
        if isinstance(screen, FleetScreen):
            screen.show(self.fleet.summaries())

    def on_fleet_screen_open(self, message: FleetScreen.Open) -> None:
        self.exit(message.host)


AppRunner = Callable[[Any], Awaitable[Any]]


async def _run(app: Any) -> Any:
    return await app.run_async()


async def browse(fleet: Any, *, settings: Settings, theme: str | None = None,
                 config_path: Path | None = None, title: str = "fleet",
                 run: AppRunner = _run,
                 before_stop: Callable[[], Awaitable[None]] | None = None) -> int:
    """The Fleet, then a host's dashboard, then the Fleet again ... until one quits; the
    fleet's connections live through all of them and are closed at the end."""
    from dsv4tui.tui.app import Dsv4App

    fleet.start()
    selected: str | None = None
    try:
        while True:
            app = FleetApp(fleet, settings=settings, theme=theme, selected=selected, title=title)
            host = await run(app)
            if not host:
                return int(getattr(app, "return_code", 0) or 0)
            selected = str(host)
            dash = Dsv4App(fleet.spec(selected), settings=settings, theme=theme,
                           config_path=config_path)
            dash.join_fleet(fleet.supervisor(selected))
            result = await run(dash)
            fleet.reread_runs()
            if result != BACK:
                return result if isinstance(result, int) else int(dash.return_code or 0)
    finally:
        if before_stop is not None:
            with contextlib.suppress(Exception):
                await before_stop()
        await fleet.stop()
