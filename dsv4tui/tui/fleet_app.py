"""Several hosts at once: the Fleet App, and a host's dashboard opened from it.

The connections belong to the :class:`dsv4tui.core.fleet.model.Fleet` (one HostSupervisor per
host), which lives on the event loop longer than any App: ``tui.commands.dashboard.browse``
shows the :class:`FleetApp`; ``enter`` ends it with the host's name and opens that host's
dashboard on the *same* supervisor (no reconnect, nothing uploaded again); ``0`` there ends
the dashboard with :data:`~dsv4tui.tui.controllers.fleet.BACK` and the Fleet shows again,
every other host still connected and followed all along (the dashboard's side:
:class:`dsv4tui.tui.controllers.fleet.FleetMember`). ``q`` in either quits.
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

REDRAW_S = 0.5


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
        return themes.app_variable_defaults(self)

    def on_mount(self) -> None:
        warning = themes.install(self, self._requested_theme or self.settings.theme)
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
