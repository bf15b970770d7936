"""Several hosts at once: the Fleet App, and a host's dashboard opened from it.

The connections belong to the :class:`dsv4tui.core.fleet.model.Fleet` (one HostSupervisor per host),
which lives on the event loop longer than any App: ``tui.commands.dashboard.browse`` shows
the :class:`FleetApp`; ``enter`` ends it with the host's name and opens that host's
:class:`~dsv4tui.tui.app.Dsv4App` on the *same* supervisor (no reconnect, nothing uploaded
again); ``0`` there ends the dashboard with :data:`BACK` and the Fleet shows again, every other
host still connected and followed all along. ``q`` in either quits.

:class:`FleetMember` is the dashboard's half (a mixin of Dsv4App, as app_campaign's
CampaignWatcher is): a shared supervisor is watched rather than owned, and given back with
its own streams removed instead of being stopped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.app import App
from textual.binding import Binding

from dsv4tui.core import signals
from dsv4tui.core.config import Settings
from dsv4tui.tui import themes
from dsv4tui.tui.screens.fleet import FleetScreen

BACK = "fleet"  # what a dashboard opened from the fleet exits with to go back to it
REDRAW_S = 0.5


class FleetMember:
    """Dsv4App's side of the fleet: the fleet's live connection to share (``join_fleet``),
    given back by ``0`` (its host link, ``core.view.host_link``, removes the dashboard's
    streams and stops watching it)."""

    _shared_supervisor: Any = None

    def join_fleet(self, supervisor: Any) -> None:
        self._shared_supervisor = supervisor

    def shared_supervisor(self) -> Any:
        """The fleet's supervisor to watch (None: not opened from a fleet)."""
        app: Any = self
        if self._shared_supervisor is not None:
            app.notify(f"{app.key_of('screen.fleet')}: back to the fleet (every host stays "
                       "connected)", timeout=6, markup=False)
        return self._shared_supervisor

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
        app._stopping = True
        await app.link.release(5)
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
            signals.on_quit_signals(lambda _sig: self.exit())

    def redraw(self) -> None:
        screen = self.screen
        if isinstance(screen, FleetScreen):
            screen.show(self.fleet.summaries())

    def on_fleet_screen_open(self, message: FleetScreen.Open) -> None:
        self.exit(message.host)
